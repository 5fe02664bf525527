#!/usr/bin/env bash
# Starts and stops the engines surge runs on: RabbitMQ, MariaDB and the local Redis Cluster.
#
#   deploy/engines.sh start    start whatever is not answering, create database surge, wait
#   deploy/engines.sh stop     stop the Redis Cluster, and RabbitMQ/MariaDB only if start
#                              launched them (recorded under var/engines/)
#   deploy/engines.sh status   say which engines answer
#
# The machine's standalone Redis on 6379 is never touched. Environment: SURGE_VAR_DIR
# (state dir, <repo>/var), SURGE_MYSQL_DATABASE (surge), SURGE_ENGINE_TIMEOUT (seconds, 90),
# plus those of deploy/redis-cluster.sh.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VAR_DIR="${SURGE_VAR_DIR:-$REPO_ROOT/var}"
MARKS="$VAR_DIR/engines"
DATABASE="${SURGE_MYSQL_DATABASE:-surge}"
TIMEOUT="${SURGE_ENGINE_TIMEOUT:-90}"
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf 'engines: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

rabbit_up() { timeout 20 rabbitmqctl -q status >/dev/null 2>&1; }
mysql_up() { timeout 10 mariadb-admin -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 ping >/dev/null 2>&1; }

# wait_for NAME CHECK polls CHECK until it succeeds or the timeout passes.
wait_for() {
	local name=$1 check=$2 deadline=$((SECONDS + TIMEOUT))
	until "$check"; do
		((SECONDS < deadline)) || return 1
		sleep 1
	done
	log "$name is up"
}

start_rabbitmq() {
	if rabbit_up; then
		log "RabbitMQ already answers"
		return
	fi
	log "starting RabbitMQ"
	rabbitmq-server -detached
	touch "$MARKS/rabbitmq"
	# await_startup needs the Erlang node running, which takes a moment after -detached.
	wait_for RabbitMQ rabbit_up || die "RabbitMQ did not answer within ${TIMEOUT}s (see /var/log/rabbitmq/)"
	timeout "$TIMEOUT" rabbitmqctl -q await_startup || die "RabbitMQ did not finish booting"
}

start_mariadb() {
	if mysql_up; then
		log "MariaDB already answers"
	else
		log "starting MariaDB"
		install -d -o mysql -g mysql /run/mysqld
		start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
		touch "$MARKS/mariadb"
		wait_for MariaDB mysql_up || die "MariaDB did not answer within ${TIMEOUT}s (see journal or /var/log/mysql/)"
	fi
	mariadb -h 127.0.0.1 -P 3306 -u root -e "CREATE DATABASE IF NOT EXISTS \`$DATABASE\`" ||
		die "cannot create database $DATABASE as root@127.0.0.1"
}

cmd_start() {
	mkdir -p "$MARKS"
	start_rabbitmq
	start_mariadb
	"$REPO_ROOT/deploy/redis-cluster.sh" start
}

cmd_stop() {
	"$REPO_ROOT/deploy/redis-cluster.sh" stop
	if [[ -f "$MARKS/rabbitmq" ]]; then
		log "stopping RabbitMQ (started by engines.sh)"
		rabbitmqctl -q stop || log "warning: rabbitmqctl stop failed"
		rm -f "$MARKS/rabbitmq"
	fi
	if [[ -f "$MARKS/mariadb" ]]; then
		log "stopping MariaDB (started by engines.sh)"
		mariadb-admin -h 127.0.0.1 -P 3306 -u root shutdown || log "warning: MariaDB shutdown failed"
		rm -f "$MARKS/mariadb"
	fi
}

cmd_status() {
	local rc=0
	if rabbit_up; then echo "rabbitmq: up"; else echo "rabbitmq: down" && rc=1; fi
	if mysql_up; then echo "mariadb: up"; else echo "mariadb: down" && rc=1; fi
	"$REPO_ROOT/deploy/redis-cluster.sh" status || rc=1
	return "$rc"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
	echo "usage: $0 {start|stop|status}" >&2
	exit 2
	;;
esac
