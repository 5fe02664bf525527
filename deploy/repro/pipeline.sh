# pipeline.sh: the pipeline a reproduction runs against, sourced by the scripts beside it.
#
# SURGE_REPRO_TARGET=private (the default) starts a pipeline of its own: a Redis Cluster on free
# ports from SURGE_REPRO_PORT_BASE (7400), its own MariaDB database and RabbitMQ vhost on the
# local servers, and bin/'s gateway, worker and reconciler on free ports, all removed on exit;
# the shared cluster on 7000-7005 is never touched. SURGE_REPRO_TARGET=up uses the pipeline
# `make up` runs (SURGE_HTTP_ADDR, SURGE_ADMIN_ADDR, SURGE_ADMIN_TOKEN, the cluster on 7000, the
# database surge) and leaves it running; only the SKU the script made is left behind.
#
# It sets HTTP, ADMIN, TOKEN, REDIS_PORT (any node), DB and DIR, and offers log, die, rcli, sql,
# load_sku SKU JSON, master_port SKU, worker_pid, and on_exit CMD (run at exit, last registered
# first). A script sets RESULT=0 when its check passed; the state directory is kept otherwise.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="${SURGE_REPRO_TARGET:-private}"
DIR="${SURGE_REPRO_DIR:-$(mktemp -d "/tmp/surge-$(basename "$0" .sh).XXXXXX")}"
PASSWORD="${SURGE_REDIS_PASSWORD:-surge}"
BASE="${SURGE_REPRO_PORT_BASE:-7400}"
RESULT=2
EXITS=()
declare -A PIDS=()
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() {
	log "error: $*"
	exit 2
}
rcli() { redis-cli --no-auth-warning -a "$PASSWORD" -h 127.0.0.1 "$@"; }
sql() { mariadb --no-defaults -h 127.0.0.1 -u root "$@"; }
on_exit() { EXITS=("$*" "${EXITS[@]}"); }
run_exits() {
	set +e
	local c
	for c in "${EXITS[@]}"; do eval "$c"; done
	if [[ $RESULT == 0 ]]; then rm -rf "$DIR"; else log "state and logs kept in $DIR"; fi
}
trap run_exits EXIT

for c in redis-cli mariadb curl jq; do
	command -v "$c" >/dev/null || die "$c is not installed"
done

# load_sku SKU JSON puts the admin API's stock body JSON for SKU.
load_sku() {
	curl -fsS -m 10 -X PUT "http://$ADMIN/v1/admin/stock/$1" -H "Authorization: Bearer $TOKEN" -d "$2" >/dev/null ||
		die "could not load $1 with $2"
}

# master_port SKU prints the port of the master of the slot of SKU's keys (CLUSTER NODES).
master_port() {
	local slot
	slot=$(rcli -p "$REDIS_PORT" cluster keyslot "{sku:$1}:avail")
	rcli -p "$REDIS_PORT" cluster nodes | awk -v s="$slot" '$3 ~ /master/ {
		for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (s >= r[1] && s <= r[2]) {
			split($2, a, "[:@]"); print a[2]; exit } } }'
}

# worker_pid prints the worker's process id: the one this script started, or, against `make up`,
# the process serving the worker's metrics address (SURGE_WORKER_METRICS_ADDR, 127.0.0.1:9101;
# finding another user's process takes root).
worker_pid() {
	if [[ -n ${PIDS[worker]:-} ]]; then
		echo "${PIDS[worker]}"
		return
	fi
	local addr="${SURGE_WORKER_METRICS_ADDR:-127.0.0.1:9101}" pid
	pid=$(ss -Hltnp "sport = :${addr##*:}" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
	[[ -n $pid ]] || die "no process serves the worker's metrics on $addr (as root?)"
	echo "$pid"
}

use_up() {
	HTTP="${SURGE_HTTP_ADDR:-127.0.0.1:8080}"
	ADMIN="${SURGE_ADMIN_ADDR:-127.0.0.1:8081}"
	TOKEN="${SURGE_ADMIN_TOKEN:-surge-admin}"
	REDIS_PORT="${SURGE_REPRO_REDIS_PORT:-7000}"
	DB="${SURGE_REPRO_DB:-surge}"
	curl -fsS -m 2 "http://$HTTP/readyz" >/dev/null || die "no pipeline answers on $HTTP: run make up first"
	log "against the running pipeline: gateway $HTTP, admin $ADMIN, Redis :$REDIS_PORT, database $DB"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_url() {
	local deadline=$((SECONDS + 60))
	until curl -fsS -m 2 "$1" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$2 did not come up: $(tail -n 5 "$DIR/$2.log")"
		sleep 0.2
	done
}

# use_private starts the private pipeline; extra SURGE_ settings may be passed as NAME=VALUE.
use_private() {
	local p b name
	for c in redis-server rabbitmqctl python3; do
		command -v "$c" >/dev/null || die "$c is not installed"
	done
	for b in gateway worker reconciler; do
		[[ -x $REPO_ROOT/bin/$b ]] || die "bin/$b is not built (make build)"
	done
	for p in $(seq "$BASE" $((BASE + 5))); do
		! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || die "port $p is taken: set SURGE_REPRO_PORT_BASE"
	done
	name="repro_$(date +%s)_$$"
	HTTP="127.0.0.1:$(free_port)"
	ADMIN="127.0.0.1:$(free_port)"
	TOKEN=repro-admin-token
	REDIS_PORT=$BASE
	DB=$name
	local worker_metrics reconcile_metrics
	worker_metrics="127.0.0.1:$(free_port)"
	reconcile_metrics="127.0.0.1:$(free_port)"
	cluster() { SURGE_CLUSTER_PORT_BASE=$BASE SURGE_VAR_DIR="$DIR" SURGE_REDIS_PASSWORD=$PASSWORD "$REPO_ROOT/deploy/redis-cluster.sh" "$@"; }

	log "private Redis Cluster on 127.0.0.1:$BASE-$((BASE + 5)), database and vhost $name, state in $DIR"
	on_exit "cluster stop >/dev/null 2>&1; sql -e 'DROP DATABASE IF EXISTS $name' 2>/dev/null; rabbitmqctl -q delete_vhost $name >/dev/null 2>&1"
	cluster start >"$DIR/redis-cluster.log" 2>&1 || die "redis-cluster.sh start: $(tail -n 5 "$DIR/redis-cluster.log")"
	sql -e "CREATE DATABASE $name"
	rabbitmqctl -q add_vhost "$name" >/dev/null
	rabbitmqctl -q set_permissions -p "$name" guest '.*' '.*' '.*' >/dev/null

	ENV=(SURGE_REDIS_ADDRS="$(seq -s, -f "127.0.0.1:%g" "$BASE" $((BASE + 5)))" SURGE_REDIS_PASSWORD="$PASSWORD"
		SURGE_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/$name"
		SURGE_MYSQL_DSN="root@tcp(127.0.0.1:3306)/$name"
		SURGE_HTTP_ADDR="$HTTP" SURGE_ADMIN_ADDR="$ADMIN" SURGE_ADMIN_TOKEN=$TOKEN
		SURGE_WORKER_METRICS_ADDR="$worker_metrics" SURGE_RECONCILE_METRICS_ADDR="$reconcile_metrics"
		SURGE_PPROF_ADDR= SURGE_LOG_LEVEL=info "$@")
	env "${ENV[@]}" "$REPO_ROOT/bin/gateway" migrate >"$DIR/migrate.log" 2>&1 || die "migrate: $(tail -n 5 "$DIR/migrate.log")"
	start_proc gateway "$REPO_ROOT/bin/gateway"
	wait_url "http://$HTTP/readyz" gateway
	start_proc worker "$REPO_ROOT/bin/worker"
	start_proc reconciler "$REPO_ROOT/bin/reconciler" serve
	wait_url "http://$worker_metrics/metrics" worker
	wait_url "http://$reconcile_metrics/metrics" reconciler
}

start_proc() {
	local name=$1
	shift
	env "${ENV[@]}" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
	PIDS[$name]=$!
	on_exit "kill -TERM $! 2>/dev/null; wait $! 2>/dev/null"
}

# use_pipeline picks the target; extra NAME=VALUE settings go to a private pipeline.
use_pipeline() {
	case $TARGET in
	up) use_up ;;
	private) use_private "$@" ;;
	*) die "SURGE_REPRO_TARGET is '$TARGET': want private or up" ;;
	esac
}
