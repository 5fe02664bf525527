#!/usr/bin/env bash
# Per-service users on surge's engines, each with the least it needs. Idempotent.
#
#   deploy/users.sh apply [redis|rabbitmq|mysql]...   create or update the users (default: all)
#   deploy/users.sh env SERVICE                       print the SURGE_ variables SERVICE connects with
#   deploy/users.sh exec SERVICE CMD [ARGS]...        run CMD as SERVICE (the Procfile does)
#   deploy/users.sh acl-file                          print the Redis ACL file (docker-compose.yml's
#                                                     nodes load it at each start)
#   deploy/users.sh definitions                       print the RabbitMQ definitions of the users
#                                                     (docker-compose.yml's broker loads them at boot)
#
# Services and their users (the same name on every engine): gateway -> surge-gateway,
# worker -> surge-worker, reconciler -> surge-reconciler, ops -> surge-ops (operators and the
# migrations: it owns the schema), exporter -> surge-exporter (opsctl exporter and the
# console's node health: reads node state, touches no key, no queue, no table).
#   Redis     ACL users from deploy/redis-users.acl: set live on every node (ACL SETUSER) and
#             written with the passwords' SHA-256 to $SURGE_REDIS_ACL_FILE, which
#             deploy/redis-cluster.sh loads on a node's next start. The default user stays the
#             administrator.
#   RabbitMQ  users without tags, permissions on the order exchanges and queues only
#             (rabbitmqctl import_definitions, one call).
#   MySQL     users with the table grants of deploy/mysql-grants.sql; the schema is migrated
#             first when it is missing (grants name tables).
#
# Environment (local defaults; set your own passwords anywhere else):
#   SURGE_GATEWAY_PASSWORD     surge-gateway-local      SURGE_WORKER_PASSWORD  surge-worker-local
#   SURGE_RECONCILER_PASSWORD  surge-reconciler-local   SURGE_OPS_PASSWORD     surge-ops-local
#   SURGE_EXPORTER_PASSWORD    surge-exporter-local
#   (letters, digits, '.', '_' and '-' only: they go into URLs and DSNs unescaped)
#   SURGE_RABBITMQ_ADMIN_PASSWORD  when set, `definitions` adds surge-rabbitmq-admin, an
#                              administrator for the management UI (docker-compose.yml's)
#   Each password variable may instead name a file: SURGE_GATEWAY_PASSWORD_FILE, ...,
#   SURGE_REDIS_PASSWORD_FILE, SURGE_MYSQL_ROOT_PASSWORD_FILE (compose secrets).
#   SURGE_REDIS_PASSWORD       admin (default user) password                    (surge)
#   SURGE_CLUSTER_PORT_BASE    cluster nodes on 127.0.0.1:BASE..BASE+5           (7000)
#   SURGE_REDIS_ACL_FILE       ACL file the nodes load        (<repo>/deploy/redis-acl.conf)
#   SURGE_AMQP_ADDR            RabbitMQ host:port                                (127.0.0.1:5672)
#   SURGE_AMQP_VHOST           vhost of the permissions                          (/)
#   SURGE_AMQP_EXCHANGE        prefix of every exchange and queue the services use (orders)
#   SURGE_MYSQL_ADDR           MariaDB host:port                                 (127.0.0.1:3306)
#   SURGE_MYSQL_DATABASE       database of the grants                            (surge)
#   SURGE_MYSQL_USER_HOST      host part of the MySQL users                      (127.0.0.1)
#   SURGE_MYSQL_ROOT_USER / SURGE_MYSQL_ROOT_PASSWORD   MariaDB administrator   (root / none)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES=(gateway worker reconciler ops exporter)
RULES_FILE="$REPO_ROOT/deploy/redis-users.acl"
GRANTS_FILE="$REPO_ROOT/deploy/mysql-grants.sql"
ACL_FILE="${SURGE_REDIS_ACL_FILE:-$REPO_ROOT/deploy/redis-acl.conf}"

# from_file VAR sets VAR from the file named by VAR_FILE, when that is set.
from_file() {
	local file="${1}_FILE"
	[[ -n "${!file:-}" ]] || return 0
	[[ -r "${!file}" ]] || { printf 'users: error: %s=%s is not readable\n' "$file" "${!file}" >&2; exit 1; }
	printf -v "$1" '%s' "$(<"${!file}")"
	export "${1?}"
}
for _var in SURGE_REDIS_PASSWORD SURGE_MYSQL_ROOT_PASSWORD SURGE_GATEWAY_PASSWORD SURGE_WORKER_PASSWORD \
	SURGE_RECONCILER_PASSWORD SURGE_OPS_PASSWORD SURGE_EXPORTER_PASSWORD SURGE_RABBITMQ_ADMIN_PASSWORD; do
	from_file "$_var"
done
unset _var
ADMIN_PASSWORD="${SURGE_REDIS_PASSWORD:-surge}"
BASE="${SURGE_CLUSTER_PORT_BASE:-7000}"
AMQP_ADDR="${SURGE_AMQP_ADDR:-127.0.0.1:5672}"
AMQP_VHOST="${SURGE_AMQP_VHOST:-/}"
EXCHANGE="${SURGE_AMQP_EXCHANGE:-orders}"
MYSQL_ADDR="${SURGE_MYSQL_ADDR:-127.0.0.1:3306}"
DATABASE="${SURGE_MYSQL_DATABASE:-surge}"
USER_HOST="${SURGE_MYSQL_USER_HOST:-127.0.0.1}"
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf 'users: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

user_of() { printf 'surge-%s' "$1"; }

# password_of SERVICE prints SURGE_<SERVICE>_PASSWORD or its local default.
password_of() {
	local var pw
	var="SURGE_$(tr '[:lower:]' '[:upper:]' <<<"$1")_PASSWORD"
	pw="${!var:-surge-$1-local}"
	[[ "$pw" =~ ^[A-Za-z0-9._-]+$ ]] || die "$var may contain only letters, digits, '.', '_' and '-'"
	printf '%s' "$pw"
}

known_service() {
	local s
	for s in "${SERVICES[@]}"; do [[ "$s" == "$1" ]] && return 0; done
	die "unknown service '$1' (want one of: ${SERVICES[*]})"
}

sha256() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# ---- Redis ----------------------------------------------------------------------------------

# acl_rules prints one line per entry of the rules file, "base RULES" or "NAME RULES",
# continuation lines joined and comments dropped.
acl_rules() {
	awk '
		/^[[:space:]]*(#|$)/ { next }
		/^[[:space:]]/ { sub(/^[[:space:]]+/, ""); line = line " " $0; next }
		{ if (line != "") print line; line = $0 }
		END { if (line != "") print line }
	' "$RULES_FILE" | sed -E 's/^user +//'
}

# rules_for USER prints the base rules followed by USER's own.
rules_for() {
	local base own
	base="$(acl_rules | awk '$1 == "base" {$1 = ""; print}')"
	own="$(acl_rules | awk -v u="$1" '$1 == u {$1 = ""; print}')"
	[[ -n "$own" ]] || die "$RULES_FILE defines no user $1"
	printf '%s %s' "${base# }" "${own# }"
}

# split_rules RULES fills the array RULE_ARGS, keeping a "(...)" selector as one argument.
split_rules() {
	local tok sel=""
	RULE_ARGS=()
	for tok in $1; do
		if [[ -n "$sel" ]]; then
			sel+=" $tok"
			[[ "$tok" == *')' ]] && { RULE_ARGS+=("$sel"); sel=""; }
		elif [[ "$tok" == '('* && "$tok" != *')' ]]; then
			sel="$tok"
		else
			RULE_ARGS+=("$tok")
		fi
	done
	[[ -z "$sel" ]] || die "unclosed selector in $RULES_FILE: $sel"
}

rcli() {
	local port=$1
	shift
	REDISCLI_AUTH="$ADMIN_PASSWORD" timeout 5 redis-cli -h 127.0.0.1 -p "$port" --no-auth-warning "$@"
}

apply_redis() {
	local port svc user reply applied=0 tmp
	set -f # the rules hold globs (~{sku:*}); never expand them
	for port in $(seq "$BASE" $((BASE + 5))); do
		if [[ "$(rcli "$port" PING 2>/dev/null)" != PONG ]]; then
			log "redis node $port is down: it loads the ACL file when it starts"
			continue
		fi
		for svc in "${SERVICES[@]}"; do
			user="$(user_of "$svc")"
			split_rules "$(rules_for "$user")"
			reply="$(rcli "$port" ACL SETUSER "$user" reset on "#$(sha256 "$(password_of "$svc")")" "${RULE_ARGS[@]}" 2>&1)"
			[[ "$reply" == OK ]] || die "ACL SETUSER $user on node $port: $reply"
		done
		applied=$((applied + 1))
	done
	((applied > 0)) || die "no Redis node answers on 127.0.0.1:$BASE-$((BASE + 5)) (deploy/redis-cluster.sh start)"
	# Every rule was accepted live, so the file the nodes load at start is valid too.
	tmp="$(mktemp "$ACL_FILE.XXXXXX")"
	acl_file >"$tmp"
	chmod 600 "$tmp"
	mv -f "$tmp" "$ACL_FILE"
	set +f
	log "redis: ${SERVICES[*]/#/surge-} set on $applied node(s); ACL file $ACL_FILE"
}

# acl_file prints the ACL file: the default user (the administrator) and the service users.
acl_file() {
	local svc user
	set -f
	# Redis refuses comments in an ACL file: the header lives in this script only.
	echo "user default on #$(sha256 "$ADMIN_PASSWORD") ~* &* +@all"
	for svc in "${SERVICES[@]}"; do
		user="$(user_of "$svc")"
		echo "user $user on #$(sha256 "$(password_of "$svc")") $(rules_for "$user" | tr -s ' ')"
	done
	set +f
}

# ---- RabbitMQ -------------------------------------------------------------------------------

# rabbit_hash PASSWORD prints RabbitMQ's rabbit_password_hashing_sha256 form:
# base64(salt ++ sha256(salt ++ password)) with a 4-byte random salt.
# Only openssl and printf: the broker's image, where compose runs this, has no xxd.
rabbit_hash() {
	local salt
	salt="$(openssl rand -hex 4 | sed 's/../\\x&/g')"
	{
		printf '%b' "$salt"
		{ printf '%b' "$salt"; printf '%s' "$1"; } | openssl dgst -sha256 -binary
	} | openssl base64 -A
}

# definitions prints the users and their permissions as RabbitMQ definitions (JSON).
definitions() {
	local svc user names all none defs sep=""
	# Every exchange and queue of the flow starts with the exchange name (orders, orders.created,
	# orders.retry.10s, orders.dead, ...); JSON needs the regex's backslashes doubled.
	names="^${EXCHANGE//./\\\\.}(\\\\..+)?\$"
	none='^$'
	defs='{"users":['
	for svc in "${SERVICES[@]}"; do
		defs+="$sep{\"name\":\"$(user_of "$svc")\",\"password_hash\":\"$(rabbit_hash "$(password_of "$svc")")\","
		defs+='"hashing_algorithm":"rabbit_password_hashing_sha256","tags":""}'
		sep=","
	done
	# The management UI's administrator, where one is wanted (compose); no service uses it.
	if [[ -n "${SURGE_RABBITMQ_ADMIN_PASSWORD:-}" ]]; then
		defs+="$sep{\"name\":\"surge-rabbitmq-admin\",\"password_hash\":\"$(rabbit_hash "$SURGE_RABBITMQ_ADMIN_PASSWORD")\","
		defs+='"hashing_algorithm":"rabbit_password_hashing_sha256","tags":"administrator"}'
	fi
	defs+='],"permissions":['
	sep=""
	for svc in "${SERVICES[@]}"; do
		user="$(user_of "$svc")"
		case "$svc" in
		# The gateway and the worker both declare the topology at start-up (configure, plus
		# write on queues and read on exchanges to bind), publish, and consume or replay.
		gateway | worker | ops) all="\"configure\":\"$names\",\"write\":\"$names\",\"read\":\"$names\"" ;;
		# The reconciler publishes again the orders whose reservation outlived its grace period
		# with nothing in MySQL (write on the order exchange); it declares and reads nothing.
		reconciler) all="\"configure\":\"$none\",\"write\":\"$names\",\"read\":\"$none\"" ;;
		# The exporter counts messages and consumers with passive declares, which RabbitMQ
		# checks against no permission: it can neither publish nor consume an order.
		exporter) all="\"configure\":\"$none\",\"write\":\"$none\",\"read\":\"$none\"" ;;
		esac
		defs+="$sep{\"user\":\"$user\",\"vhost\":\"$AMQP_VHOST\",$all}"
		sep=","
	done
	if [[ -n "${SURGE_RABBITMQ_ADMIN_PASSWORD:-}" ]]; then
		defs+="$sep{\"user\":\"surge-rabbitmq-admin\",\"vhost\":\"$AMQP_VHOST\",\"configure\":\".*\",\"write\":\".*\",\"read\":\".*\"}"
	fi
	# The vhost too: a broker that loads these at boot creates it before the permissions.
	defs+="],\"vhosts\":[{\"name\":\"$AMQP_VHOST\"}]}"
	printf '%s\n' "$defs"
}

apply_rabbitmq() {
	local defs tmp
	defs="$(definitions)"
	tmp="$(mktemp)"
	trap "rm -f '$tmp'" EXIT
	printf '%s' "$defs" >"$tmp"
	# The broker reads the file itself, as its own user.
	chown rabbitmq "$tmp" 2>/dev/null || chmod 644 "$tmp"
	timeout 60 rabbitmqctl -q import_definitions "$tmp" >/dev/null ||
		die "rabbitmqctl import_definitions failed (is RabbitMQ up? deploy/engines.sh start)"
	rm -f "$tmp"
	trap - EXIT
	log "rabbitmq: ${SERVICES[*]/#/surge-} with permissions on $EXCHANGE* in vhost $AMQP_VHOST"
}

# ---- MySQL ----------------------------------------------------------------------------------

msql() {
	MYSQL_PWD="${SURGE_MYSQL_ROOT_PASSWORD:-}" timeout 30 mariadb -h "${MYSQL_ADDR%:*}" -P "${MYSQL_ADDR##*:}" \
		-u "${SURGE_MYSQL_ROOT_USER:-root}" --batch --skip-column-names "$@"
}

# grant_tables_missing lists the tables deploy/mysql-grants.sql grants on that the database lacks
# (one query for the database's tables).
grant_tables_missing() {
	local t have
	have=" $(msql -e "SELECT table_name FROM information_schema.tables WHERE table_schema = '$DATABASE'" | tr '\n' ' ') "
	for t in $(grep -o '`{db}`\.`[A-Za-z0-9_]*`' "$GRANTS_FILE" | sed 's/.*\.`\(.*\)`/\1/' | sort -u); do
		[[ $have == *" $t "* ]] || printf '%s ' "$t"
	done
}

# migrate_if_needed applies the migrations when a table the grants name is missing: a database
# with no schema yet, or one migrated by an older build.
migrate_if_needed() {
	local missing
	missing="$(grant_tables_missing)"
	[[ -n "$missing" ]] || return 0
	log "mysql: database $DATABASE lacks ${missing% }; migrating"
	local dsn="${SURGE_MYSQL_ROOT_USER:-root}${SURGE_MYSQL_ROOT_PASSWORD:+:$SURGE_MYSQL_ROOT_PASSWORD}@tcp($MYSQL_ADDR)/$DATABASE"
	if [[ -x "$REPO_ROOT/bin/opsctl" ]]; then
		SURGE_MYSQL_DSN="$dsn" "$REPO_ROOT/bin/opsctl" migrate
	else
		(cd "$REPO_ROOT" && SURGE_MYSQL_DSN="$dsn" go run ./services/opsctl migrate)
	fi
	missing="$(grant_tables_missing)"
	[[ -z "$missing" ]] || die "mysql: $DATABASE still lacks ${missing% } after migrating (bin/opsctl older than sql/? make build)"
}

apply_mysql() {
	local svc user sql="" revokes
	[[ "$DATABASE" =~ ^[A-Za-z0-9_]+$ ]] || die "SURGE_MYSQL_DATABASE must be letters, digits and '_'"
	[[ "$USER_HOST" =~ ^[A-Za-z0-9._%-]+$ ]] || die "SURGE_MYSQL_USER_HOST is not a host pattern"
	migrate_if_needed
	for svc in "${SERVICES[@]}"; do
		user="$(user_of "$svc")"
		sql+="CREATE USER IF NOT EXISTS '$user'@'$USER_HOST' IDENTIFIED BY '$(password_of "$svc")';"
		sql+="ALTER USER '$user'@'$USER_HOST' IDENTIFIED BY '$(password_of "$svc")';"
	done
	# Start from no grant on this database, whatever an older grants file gave.
	revokes="$(msql -e "
		SELECT CONCAT('REVOKE ALL PRIVILEGES ON \`', Db, '\`.\`', Table_name, '\` FROM ''', User, '''@''', Host, ''';')
		FROM mysql.tables_priv WHERE Db = '$DATABASE' AND Host = '$USER_HOST' AND User LIKE 'surge-%'
		UNION ALL
		SELECT CONCAT('REVOKE ALL PRIVILEGES ON \`', Db, '\`.* FROM ''', User, '''@''', Host, ''';')
		FROM mysql.db WHERE Db = '$DATABASE' AND Host = '$USER_HOST' AND User LIKE 'surge-%'")"
	sql+="$revokes"
	sql+="$(sed -e '/^--/d' -e "s/{db}/$DATABASE/g" -e "s/{host}/$USER_HOST/g" "$GRANTS_FILE")"
	msql -e "$sql" || die "applying MySQL users and grants failed"
	log "mysql: ${SERVICES[*]/#/surge-}@$USER_HOST with the grants of deploy/mysql-grants.sql on $DATABASE"
}

# ---- env / exec ------------------------------------------------------------------------------

print_env() {
	local svc=$1 user pw
	known_service "$svc"
	user="$(user_of "$svc")"
	pw="$(password_of "$svc")"
	printf 'export SURGE_REDIS_USER=%q\n' "$user"
	printf 'export SURGE_REDIS_PASSWORD=%q\n' "$pw"
	printf 'export SURGE_AMQP_URL=%q\n' "amqp://$user:$pw@$AMQP_ADDR/$([[ "$AMQP_VHOST" == / ]] || printf '%s' "$AMQP_VHOST")"
	printf 'export SURGE_MYSQL_DSN=%q\n' "$user:$pw@tcp($MYSQL_ADDR)/$DATABASE"
}

cmd_apply() {
	local engines=("$@") e
	((${#engines[@]})) || engines=(redis rabbitmq mysql)
	for e in "${engines[@]}"; do
		case "$e" in
		redis) apply_redis ;;
		rabbitmq) apply_rabbitmq ;;
		mysql) apply_mysql ;;
		*) die "unknown engine '$e' (want redis, rabbitmq or mysql)" ;;
		esac
	done
}

case "${1:-}" in
apply) shift; cmd_apply "$@" ;;
env) [[ $# == 2 ]] || die "usage: $0 env SERVICE"; print_env "$2" ;;
acl-file) acl_file ;;
definitions) definitions ;;
exec)
	[[ $# -ge 3 ]] || die "usage: $0 exec SERVICE CMD [ARGS]..."
	eval "$(print_env "$2")"
	shift 2
	exec "$@"
	;;
*)
	echo "usage: $0 {apply [redis|rabbitmq|mysql]... | env SERVICE | exec SERVICE CMD [ARGS]... | acl-file | definitions}" >&2
	exit 2
	;;
esac
