#!/usr/bin/env bash
# Creates the credentials docker-compose.yml runs with, once: random passwords for the Redis
# administrator, the MariaDB root user and each service user (surge-gateway, surge-worker,
# surge-reconciler, surge-ops, as deploy/users.sh names them), the gateway's admin token, and
# each service's env file built from them. Existing passwords are kept; the env files are
# written again from them. Nothing here is committed (.gitignore).
#
#   deploy/compose/secrets.sh        then: docker compose up -d
#
# SURGE_COMPOSE_SECRETS  directory of the files (deploy/compose/secrets); docker-compose.yml
#                        reads the same variable
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${SURGE_COMPOSE_SECRETS:-$REPO_ROOT/deploy/compose/secrets}"
SERVICES=(gateway worker reconciler ops)

umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"

# secret NAME BYTES prints the secret in DIR/NAME, creating it first when missing.
secret() {
	local file="$DIR/$1"
	[[ -s "$file" ]] || openssl rand -hex "$2" | tr -d '\n' >"$file"
	# The engines' containers read these as their own users: world-readable inside DIR (0700).
	chmod 644 "$file"
	cat "$file"
}

admin="$(secret redis-admin.password 24)"
root="$(secret mariadb-root.password 24)"
token="$(secret admin-token 32)"
: "$admin"
for svc in "${SERVICES[@]}"; do
	pw="$(secret "$svc.password" 24)"
	user="surge-$svc"
	{
		echo "# Written by deploy/compose/secrets.sh from $svc.password; edits are overwritten."
		echo "SURGE_REDIS_USER=$user"
		echo "SURGE_REDIS_PASSWORD=$pw"
		echo "SURGE_AMQP_URL=amqp://$user:$pw@rabbitmq:5672/"
		echo "SURGE_MYSQL_DSN=$user:$pw@tcp(mariadb:3306)/surge"
		[[ "$svc" != gateway ]] || echo "SURGE_ADMIN_TOKEN=$token"
	} >"$DIR/$user.env"
done
{
	echo "# Written by deploy/compose/secrets.sh: migrations run as MariaDB's administrator, before"
	echo "# the service users (whose table grants need the tables) exist."
	echo "SURGE_MYSQL_DSN=root:$root@tcp(mariadb:3306)/surge"
} >"$DIR/migrate.env"
echo "secrets: $DIR (keep it; docker compose down -v forgets the data, not these)" >&2
