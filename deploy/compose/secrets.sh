#!/usr/bin/env bash
# Creates the credentials docker-compose.yml runs with, once: random passwords for the Redis
# administrator, the MariaDB root user, RabbitMQ's management UI administrator
# (surge-rabbitmq-admin) and each service user (surge-gateway, surge-worker, surge-reconciler,
# surge-ops, surge-exporter, as deploy/users.sh names them), the gateway's admin token, and
# from them each service's AMQP URL and MySQL DSN. Every credential is a file of its own, which
# docker-compose.yml mounts as a compose secret under /run/secrets/ and the programs read
# through their SURGE_<NAME>_FILE variables: none is ever in an environment variable.
# Existing passwords are kept; the URLs and DSNs are written again from them. Nothing here is
# committed (.gitignore).
#
#   deploy/compose/secrets.sh        then: docker compose up -d
#
# SURGE_COMPOSE_SECRETS  directory of the files (deploy/compose/secrets); docker-compose.yml
#                        reads the same variable
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${SURGE_COMPOSE_SECRETS:-$REPO_ROOT/deploy/compose/secrets}"
SERVICES=(gateway worker reconciler ops exporter)

umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"

# secret NAME BYTES prints the secret in DIR/NAME, creating it first when missing.
secret() {
	local file="$DIR/$1"
	[[ -s "$file" ]] || openssl rand -hex "$2" | tr -d '\n' >"$file"
	# The containers read these as their own users (65532, redis, rabbitmq, mysql):
	# world-readable inside DIR (0700).
	chmod 644 "$file"
	cat "$file"
}

# derived NAME VALUE writes a credential built from the secrets (a URL, a DSN).
derived() {
	printf '%s' "$2" >"$DIR/$1"
	chmod 644 "$DIR/$1"
}

secret redis-admin.password 24 >/dev/null
root="$(secret mariadb-root.password 24)"
secret rabbitmq-admin.password 24 >/dev/null
secret admin-token 32 >/dev/null
for svc in "${SERVICES[@]}"; do
	pw="$(secret "$svc.password" 24)"
	user="surge-$svc"
	derived "$user.amqp-url" "amqp://$user:$pw@rabbitmq:5672/"
	# The exporter reads no MySQL.
	[[ "$svc" == exporter ]] || derived "$user.mysql-dsn" "$user:$pw@tcp(mariadb:3306)/surge"
done
# Migrations run as MariaDB's administrator, before the service users (whose table grants
# need the tables) exist.
derived migrate.mysql-dsn "root:$root@tcp(mariadb:3306)/surge"
# The env files of earlier versions held every credential in the clear: gone.
rm -f "$DIR"/*.env
echo "secrets: $DIR (keep it; docker compose down -v forgets the data, not these)" >&2
