#!/usr/bin/env bash
# redis-drop.sh: a black-box check of the promise to buyers while one SKU's Redis master is
# unreachable for a few seconds (every packet to its port dropped, no failover: the drops stay
# under cluster-node-timeout, 5 s). 40 buyers order one unit each, every purchase under its own
# customer id and key, while the master's port is dropped for 3.4 s, 4.0 s and 4.6 s. After the
# sale, and after the reconciler's grace (3 s here), it checks:
#
#   - no purchase answered `503 unavailable` holds a reservation or is invoiced;
#   - every purchase answered 202 is invoiced.
#
# It runs a private pipeline: a Redis Cluster of its own (deploy/redis-cluster.sh on free ports
# from SURGE_REPRO_PORT_BASE, 7400), its own MariaDB database and RabbitMQ vhost on the local
# servers, and bin/'s gateway, worker and reconciler on free ports; it removes them all on exit.
# The shared cluster on 7000-7005 is never touched. Needs root (iptables on lo).
#
#   deploy/repro/redis-drop.sh            exit 0: the promise held; 1: it was broken (listed)
#
# A broken promise needs a reserve call caught by a drop at the wrong moment: with the defaults
# about one run in two shows it on a 2-core machine; more drops in SURGE_REPRO_DROPS (the list is
# run in order, 3 s apart) give it more chances.
#
# Environment: SURGE_REPRO_PORT_BASE (7400), SURGE_REPRO_DIR (state, a fresh mktemp dir, kept
# on failure for its logs), SURGE_REPRO_DROPS (seconds, "3.4 4.0 4.6"), SURGE_REPRO_BUYERS (40).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="${SURGE_REPRO_PORT_BASE:-7400}"
DROPS="${SURGE_REPRO_DROPS:-3.4 4.0 4.6}"
BUYERS="${SURGE_REPRO_BUYERS:-40}"
DIR="${SURGE_REPRO_DIR:-$(mktemp -d /tmp/surge-redis-drop.XXXXXX)}"
PASSWORD=surge
TOKEN=repro-admin-token
GRACE=3s
NAME="repro_$(date +%s)_$$"
SKU="drop-$(date +%s)-$$"
UNITS=1000000
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf 'redis-drop: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 2
}

[[ $EUID == 0 ]] || die "needs root (iptables)"
for c in iptables redis-server redis-cli rabbitmqctl mariadb curl jq; do
	command -v "$c" >/dev/null || die "$c is not installed"
done
for b in gateway worker reconciler; do
	[[ -x $REPO_ROOT/bin/$b ]] || die "bin/$b is not built (make build)"
done
for p in $(seq "$BASE" $((BASE + 5))); do
	! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || die "port $p is taken: set SURGE_REPRO_PORT_BASE"
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
ADMIN_PORT=$(free_port)
WORKER_METRICS_PORT=$(free_port)
RECONCILE_METRICS_PORT=$(free_port)

cluster() { SURGE_CLUSTER_PORT_BASE=$BASE SURGE_VAR_DIR="$DIR" SURGE_REDIS_PASSWORD=$PASSWORD "$REPO_ROOT/deploy/redis-cluster.sh" "$@"; }
rcli() { redis-cli --no-auth-warning -a "$PASSWORD" -h 127.0.0.1 "$@"; }
sql() { mariadb --no-defaults -h 127.0.0.1 -u root "$@"; }

DROP_RULE=()
PIDS=()
result=2
cleanup() {
	set +e
	[[ ${#DROP_RULE[@]} == 0 ]] || iptables -D INPUT "${DROP_RULE[@]}" 2>/dev/null
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	cluster stop >/dev/null 2>&1
	sql -e "DROP DATABASE IF EXISTS $NAME" 2>/dev/null
	rabbitmqctl -q delete_vhost "$NAME" >/dev/null 2>&1
	if [[ $result == 0 ]]; then rm -rf "$DIR"; else log "state and logs kept in $DIR"; fi
}
trap cleanup EXIT

# ---- the private pipeline --------------------------------------------------------------------

mkdir -p "$DIR/buyers"
log "private Redis Cluster on 127.0.0.1:$BASE-$((BASE + 5)), database and vhost $NAME, state in $DIR"
cluster start >"$DIR/redis-cluster.log" 2>&1 || die "redis-cluster.sh start: $(tail -n 5 "$DIR/redis-cluster.log")"
sql -e "CREATE DATABASE $NAME"
rabbitmqctl -q add_vhost "$NAME" >/dev/null
rabbitmqctl -q set_permissions -p "$NAME" guest '.*' '.*' '.*' >/dev/null

ADDRS=$(seq -s, -f "127.0.0.1:%g" "$BASE" $((BASE + 5)))
ENV=(SURGE_REDIS_ADDRS="$ADDRS" SURGE_REDIS_PASSWORD=$PASSWORD
	SURGE_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/$NAME"
	SURGE_MYSQL_DSN="root@tcp(127.0.0.1:3306)/$NAME"
	SURGE_HTTP_ADDR="127.0.0.1:$HTTP_PORT" SURGE_ADMIN_ADDR="127.0.0.1:$ADMIN_PORT" SURGE_ADMIN_TOKEN=$TOKEN
	SURGE_WORKER_METRICS_ADDR="127.0.0.1:$WORKER_METRICS_PORT"
	SURGE_RECONCILE_METRICS_ADDR="127.0.0.1:$RECONCILE_METRICS_PORT"
	SURGE_RECONCILE_GRACE=$GRACE SURGE_RECONCILE_EVERY=2s SURGE_PPROF_ADDR= SURGE_LOG_LEVEL=info)

env "${ENV[@]}" "$REPO_ROOT/bin/gateway" migrate >"$DIR/migrate.log" 2>&1 || die "migrate: $(tail -n 5 "$DIR/migrate.log")"
start() {
	local name=$1
	shift
	env "${ENV[@]}" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
}
wait_url() {
	local deadline=$((SECONDS + 60))
	until curl -fsS -m 2 "$1" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$2 did not come up: $(tail -n 5 "$DIR/$2.log")"
		sleep 0.2
	done
}
start gateway "$REPO_ROOT/bin/gateway"
wait_url "http://127.0.0.1:$HTTP_PORT/readyz" gateway
start worker "$REPO_ROOT/bin/worker"
start reconciler "$REPO_ROOT/bin/reconciler" serve
wait_url "http://127.0.0.1:$WORKER_METRICS_PORT/metrics" worker
wait_url "http://127.0.0.1:$RECONCILE_METRICS_PORT/metrics" reconciler

curl -fsS -m 10 -X PUT "http://127.0.0.1:$ADMIN_PORT/v1/admin/stock/$SKU" -H "Authorization: Bearer $TOKEN" \
	-d "{\"stock\":$UNITS,\"name\":\"drop\",\"price_cents\":100}" >/dev/null || die "could not load $SKU"

# The SKU's master: the node CLUSTER NODES lists as master of the slot of its keys.
slot=$(rcli -p "$BASE" cluster keyslot "{sku:$SKU}:avail")
MASTER_PORT=$(rcli -p "$BASE" cluster nodes | awk -v s="$slot" '$3 ~ /master/ {
	for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (s >= r[1] && s <= r[2]) {
		split($2, a, "[:@]"); print a[2]; exit } } }')
[[ -n $MASTER_PORT ]] || die "no master found for slot $slot"
log "$SKU: slot $slot on the master 127.0.0.1:$MASTER_PORT; gateway on :$HTTP_PORT"

# ---- the sale --------------------------------------------------------------------------------

# buyer N buys one unit after another, each under a fresh customer and key, until the stop
# file exists; one line per purchase: customer, HTTP status, error code, order id.
buyer() {
	local n=0 customer out status body
	while [[ ! -e $DIR/stop ]]; do
		customer="$SKU-b$1-$n"
		n=$((n + 1))
		out=$(curl -sS -m 20 -w '\n%{http_code}' -X POST "http://127.0.0.1:$HTTP_PORT/v1/orders" \
			-H 'Content-Type: application/json' -H "Idempotency-Key: k-$customer" \
			-d "{\"sku\":\"$SKU\",\"qty\":1,\"customer_id\":\"$customer\"}" 2>/dev/null) || out=$'\n000'
		status=${out##*$'\n'}
		body=${out%$'\n'*}
		printf '%s %s %s %s\n' "$customer" "$status" \
			"$(jq -r '.error.code // "-"' <<<"$body" 2>/dev/null || echo -)" \
			"$(jq -r '.order_id // .error.order_id // "-"' <<<"$body" 2>/dev/null || echo -)"
		sleep 0.05
	done >"$DIR/buyers/$1"
}
for b in $(seq 1 "$BUYERS"); do
	buyer "$b" &
	PIDS+=($!)
done
BUYER_PIDS=("${PIDS[@]: -$BUYERS}")

sleep 2
for d in $DROPS; do
	DROP_RULE=(-i lo -p tcp --dport "$MASTER_PORT" -j DROP)
	iptables -I INPUT "${DROP_RULE[@]}"
	log "dropping every packet to :$MASTER_PORT for ${d}s"
	sleep "$d"
	iptables -D INPUT "${DROP_RULE[@]}"
	DROP_RULE=()
	sleep 3
done
touch "$DIR/stop"
for pid in "${BUYER_PIDS[@]}"; do wait "$pid" || true; done
cat "$DIR"/buyers/* >"$DIR/answers"
log "answers: $(awk '{k = $2 ($2 == "503" ? " " $3 : ""); n[k]++} END {for (k in n) printf "%s: %d, ", k, n[k]}' "$DIR/answers")"

# ---- after the grace: every order settled ----------------------------------------------------

# Settled: no reservation left in Redis (the reconciler publishes a reservation older than the
# grace again, the worker invoices it and commits it in Redis).
settled() { [[ $(rcli -p "$MASTER_PORT" hlen "{sku:$SKU}:resv") == 0 ]]; }
deadline=$((SECONDS + 90))
until settled; do
	((SECONDS < deadline)) || {
		log "not settled after 90 s: checking as it is"
		break
	}
	sleep 1
done

# ---- the checks ------------------------------------------------------------------------------

sql -N "$NAME" -e "SELECT customer_id, order_id, status FROM orders WHERE sku = '$SKU'" | sort >"$DIR/mysql"
rcli -p "$MASTER_PORT" hgetall "{sku:$SKU}:resv" | paste - - |
	awk '{n = split($2, f, ":"); print f[n], $1}' | sort >"$DIR/reserved"

# answers: customer status code order_id; mysql: customer order_id status; reserved: customer order_id.
awk 'FILENAME == ARGV[1] {inv[$1] = $2 " " $3; next}
	FILENAME == ARGV[2] {resv[$1] = $2; next}
	$2 == "503" && $3 == "unavailable" {
		if ($1 in inv) print "BROKEN: " $1 " was answered 503 unavailable, MySQL holds its order: " inv[$1]
		if ($1 in resv) print "BROKEN: " $1 " was answered 503 unavailable, Redis holds its reservation " resv[$1]
	}
	$2 == "202" && inv[$1] != $4 " invoiced" {
		print "BROKEN: " $1 " was answered 202 for " $4 ", MySQL holds " ($1 in inv ? inv[$1] : "nothing")
	}' "$DIR/mysql" "$DIR/reserved" "$DIR/answers" >"$DIR/broken"
sed 's/^/redis-drop: /' "$DIR/broken" >&2
broken=$(wc -l <"$DIR/broken")
accepted=$(awk '$2 == "202"' "$DIR/answers" | wc -l)
unavailable=$(awk '$2 == "503" && $3 == "unavailable"' "$DIR/answers" | wc -l)
log "$accepted purchases answered 202, $unavailable answered 503 unavailable; broken promises: $broken"
if ((broken == 0)); then result=0; else result=1; fi
exit "$result"
