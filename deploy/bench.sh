#!/usr/bin/env bash
# Benchmarks surge against the naive SQL path, the sold-out floor and the engines' raw ceilings,
# in one run (make bench). It starts its own gateway and worker on their own port, queues and
# database, so a pipeline started by `make up` is not disturbed, and stops them at the end.
#
#   deploy/bench.sh            run everything, print the table, write var/bench/
#   deploy/bench.sh --record   also copy results.json, table.txt and the plots to bench/
#
# Steps, in order:
#   1. raw ceilings: EVALSHA (plain and pipelined), confirmed publishes, batched inserts, and
#      the load generator against an empty in-process HTTP handler;
#   2. the naive SQL flash sale (loadgen naive-server: one MySQL transaction per order);
#   3. surge's flash sale (closed loop), which leaves its SKU sold out and settled;
#   4. Redis around sold-out answers on that SKU: DBSIZE and used_memory summed over the masters,
#      read before and 2 s after, so keys and bytes per 100,000 sold-out answers;
#   5. sold-out answers in a closed loop, surge then the floor (loadgen floor-server: the
#      gateway's decoding and 409, no engine): each path's maximum;
#   6. open loops at BENCH_OPEN_PERCENTS of surge's sold-out maximum, surge and the floor
#      interleaved at the same rates (surge 10%, floor 10%, surge 30%, ...), each latency
#      counted from when its request was due;
#   7. the sustained load, every order accepted (closed loop): the accepting path's maximum;
#   8. open loops at BENCH_OPEN_PERCENTS of its accepted rate, every order accepted.
# CPU profiles of the gateway and the worker are taken during the flash sale and the sustained
# load (var/bench/pprof/); none during the sold-out runs, which the floor is compared with.
#
# Environment (defaults): BENCH_DIR (var/bench), BENCH_PORT (18080; +1 and +2 serve the
# gateway's and worker's profiles, +3 the worker's metrics, +4 the gateway's admin listener,
# +10 the naive server, +11 the floor), BENCH_CONCURRENCY (256),
# BENCH_FLASH_REQUESTS (50000), BENCH_NAIVE_REQUESTS (20000), BENCH_FLASH_STOCK (100; fewer
# than the flash sale's requests, as the sold-out runs need its SKU sold out),
# BENCH_KEYS_REQUESTS (100000: sold-out answers read around in Redis),
# BENCH_SOLD_OUT_SECONDS (5: each sold-out closed loop), BENCH_OPEN_PERCENTS ("10 30 50 70"),
# BENCH_OPEN_SECONDS (5: each open loop), BENCH_SUSTAINED_SECONDS (20), BENCH_RAW_SECONDS (3),
# BENCH_IDEMPOTENCY_TTL (2m: a run leaves a few hundred thousand records; in a shared cluster they
# slowed every SCAN (the reconciler's, the tests') until they expired),
# BENCH_IP_RATE (-1: the gateway's per-IP rate limit off),
# BENCH_MAX_PER_CUSTOMER (0: no purchase limit; N > 0 loads the flash sale's stock with that
# limit per customer: each buyer sends one order, so none is refused, and the run measures what
# counting costs),
# BENCH_KEEP=1 keeps the benchmark database and queues for inspection.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

DIR="${BENCH_DIR:-var/bench}"
PORT="${BENCH_PORT:-18080}"
C="${BENCH_CONCURRENCY:-256}"
FLASH_N="${BENCH_FLASH_REQUESTS:-50000}"
NAIVE_N="${BENCH_NAIVE_REQUESTS:-20000}"
FLASH_STOCK="${BENCH_FLASH_STOCK:-100}"
MAX_PER_CUSTOMER="${BENCH_MAX_PER_CUSTOMER:-0}"
KEYS_N="${BENCH_KEYS_REQUESTS:-100000}"
SOLD_OUT_S="${BENCH_SOLD_OUT_SECONDS:-5}"
OPEN_PERCENTS="${BENCH_OPEN_PERCENTS:-10 30 50 70}"
OPEN_S="${BENCH_OPEN_SECONDS:-5}"
SUSTAINED_S="${BENCH_SUSTAINED_SECONDS:-20}"
RAW_S="${BENCH_RAW_SECONDS:-3}"
RECORD=0
[[ "${1:-}" == "--record" ]] && RECORD=1

RUN="b$(date +%s)"
export SURGE_HTTP_ADDR="127.0.0.1:$PORT"
export SURGE_WORKER_METRICS_ADDR="127.0.0.1:$((PORT + 3))"
export SURGE_ADMIN_ADDR="127.0.0.1:$((PORT + 4))"
export SURGE_AMQP_EXCHANGE="bench.orders"
export SURGE_AMQP_QUEUE="bench.orders.created"
export SURGE_AMQP_DEAD_QUEUE="bench.orders.dead"
export SURGE_MYSQL_DSN="${BENCH_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/surge_bench}"
export SURGE_IDEMPOTENCY_TTL="${BENCH_IDEMPOTENCY_TTL:-2m}"
# The TTL must be at least twice the reconciler's grace (the gateway refuses a shorter one);
# nothing reconciles during a run, so a 1m grace keeps the 2m TTL.
export SURGE_RECONCILE_GRACE="${BENCH_RECONCILE_GRACE:-1m}"
export SURGE_LOG_LEVEL="${SURGE_LOG_LEVEL:-warn}"
# Every request comes from this one machine, standing in for many shoppers: the per-IP budget
# (one hot Redis key) would measure the generator's address, so it is off unless asked for.
# The per-customer budget stays on (each request is a new customer).
export SURGE_RATE_LIMIT_IP_RATE="${BENCH_IP_RATE:--1}"
GATEWAY_URL="http://$SURGE_HTTP_ADDR"
NAIVE_ADDR="127.0.0.1:$((PORT + 10))"
FLOOR_ADDR="127.0.0.1:$((PORT + 11))"

log() { printf '\nbench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [[ "${BENCH_KEEP:-0}" != 1 ]]; then bin/loadgen reset >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# start NAME CMD... runs a process in the background with its log under $DIR/log.
start() {
	local name=$1
	shift
	"$@" >"$DIR/log/$name.log" 2>&1 &
	PIDS+=($!)
	LAST_PID=$!
}

# stop_last PID stops one process this script started.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# json_number FILE KEY prints the first numeric value of "KEY" in FILE.
json_number() { sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" "$1" | head -n 1; }

# share RATE PERCENT prints PERCENT% of RATE, a whole number of requests per second.
share() { awk -v r="$1" -v p="$2" 'BEGIN { printf "%d", r * p / 100 }'; }

((FLASH_N > FLASH_STOCK)) || die "BENCH_FLASH_REQUESTS ($FLASH_N) must exceed BENCH_FLASH_STOCK ($FLASH_STOCK): the sold-out runs use the flash sale's SKU, sold out"
for pct in $OPEN_PERCENTS; do
	[[ "$pct" =~ ^[1-9][0-9]?$|^100$ ]] || die "BENCH_OPEN_PERCENTS: $pct is not a whole percent from 1 to 100"
done

rm -rf "$DIR"
mkdir -p "$DIR/log" "$DIR/pprof"
cat /proc/loadavg >"$DIR/loadavg-before.txt" 2>/dev/null || true
log "building"
make --no-print-directory build >/dev/null
{
	redis-server --version 2>/dev/null | cut -d' ' -f1-3 || true
	echo "RabbitMQ $(timeout 20 rabbitmqctl -q version 2>/dev/null || echo unknown)"
	mariadb --version 2>/dev/null || mysql --version 2>/dev/null || true
} >"$DIR/versions.txt"

log "fresh database and queues (${SURGE_MYSQL_DSN##*/}, $SURGE_AMQP_QUEUE)"
bin/loadgen reset
bin/gateway migrate

# engine_pids lists the engines' processes (",redis7000=PID,...,rabbitmq=PID,mariadb=PID"), so the
# report says how much CPU each request cost them too. An engine not found is left out.
engine_pids() {
	local p pid
	for p in 7000 7001 7002 7003 7004 7005; do
		pid="$(pgrep -f "redis-server .*:$p \\[cluster\\]" | head -1)"
		[[ -n "$pid" ]] && echo -n ",redis$p=$pid"
	done
	pid="$(pgrep -x beam.smp | head -1)"
	[[ -n "$pid" ]] && echo -n ",rabbitmq=$pid"
	pid="$(pgrep -x mariadbd | head -1)"
	[[ -n "$pid" ]] && echo -n ",mariadb=$pid"
	return 0
}

log "raw ceilings (${RAW_S}s each)"
bin/loadgen raw redis -d "${RAW_S}s" -json "$DIR/raw-redis.json"
bin/loadgen raw redis -d "${RAW_S}s" -pipeline 50 -c 8 -json "$DIR/raw-redis-pipelined.json"
bin/loadgen raw amqp -d "${RAW_S}s" -json "$DIR/raw-amqp.json"
bin/loadgen raw mysql -d "${RAW_S}s" -json "$DIR/raw-mysql.json"
bin/loadgen raw http -d "${RAW_S}s" -c "$C" -json "$DIR/raw-http.json"

log "naive SQL flash sale: $FLASH_STOCK units, $NAIVE_N requests, $C concurrent"
start naive bin/loadgen naive-server -addr "$NAIVE_ADDR"
NAIVE_PID=$LAST_PID
deploy/wait-ready.sh "http://$NAIVE_ADDR/healthz" 30 "$DIR/log/naive.log"
bin/loadgen run -label naive_sql -url "http://$NAIVE_ADDR" -admin-url "http://$NAIVE_ADDR" -sku "naive-$RUN" -stock "$FLASH_STOCK" \
	-c "$C" -n "$NAIVE_N" -check -stock-view=false -json "$DIR/naive.json"
stop_pid "$NAIVE_PID"

log "starting gateway and worker on $SURGE_HTTP_ADDR"
SURGE_PPROF_ADDR="127.0.0.1:$((PORT + 1))" start gateway bin/gateway
GATEWAY_PID=$LAST_PID
SURGE_PPROF_ADDR="127.0.0.1:$((PORT + 2))" start worker bin/worker
WORKER_PID=$LAST_PID
deploy/wait-ready.sh "$GATEWAY_URL/readyz" 60 "$DIR/log/gateway.log"
PIDS_FLAG="gateway=$GATEWAY_PID,worker=$WORKER_PID$(engine_pids)"
# profiles FLOW names the CPU profiles loadgen takes of both services from the start of a load.
profiles() { echo "gateway-$1=http://127.0.0.1:$((PORT + 1)),worker-$1=http://127.0.0.1:$((PORT + 2))"; }

log "surge flash sale: $FLASH_STOCK units (limit per customer: $MAX_PER_CUSTOMER), $FLASH_N requests, $C concurrent"
bin/loadgen run -label flash_sale -sku "flash-$RUN" -stock "$FLASH_STOCK" -max-per-customer "$MAX_PER_CUSTOMER" -c "$C" -n "$FLASH_N" \
	-check -queue "$SURGE_AMQP_QUEUE" -pids "$PIDS_FLAG" -redis -json "$DIR/flash.json" \
	-cpuprofile "$(profiles flash)" -cpuprofile-dir "$DIR/pprof"

# From here on the flash sale's SKU is sold out: its units sold, their invoices written and
# Redis settled (the flash sale's check). Every order for it is answered 409.
SOLD_OUT_SKU="flash-$RUN"

log "Redis around $KEYS_N sold-out answers, each from a new customer with a new key, read 2 s after"
bin/loadgen run -label sold_out_redis -sku "$SOLD_OUT_SKU" -c "$C" -n "$KEYS_N" -redis -redis-settle 2s \
	-pids "$PIDS_FLAG" -json "$DIR/sold-out-keys.json"

log "the floor (the gateway's decoding and sold-out answer, no engine) on $FLOOR_ADDR"
# The gateway's garbage-collector defaults (pkg/app/gc.go), so that the floor differs from the
# gateway only in what it does per request.
GOGC=400 GOMEMLIMIT=512MiB start floor bin/loadgen floor-server -addr "$FLOOR_ADDR"
FLOOR_PID=$LAST_PID
deploy/wait-ready.sh "http://$FLOOR_ADDR/healthz" 30 "$DIR/log/floor.log"

log "sold out, closed loop: surge then the floor, ${SOLD_OUT_S}s each, $C concurrent"
bin/loadgen run -label sold_out -sku "$SOLD_OUT_SKU" -c "$C" -d "${SOLD_OUT_S}s" -pids "$PIDS_FLAG" \
	-json "$DIR/sold-out.json"
bin/loadgen run -label floor -url "http://$FLOOR_ADDR" -sku "$SOLD_OUT_SKU" -c "$C" -d "${SOLD_OUT_S}s" \
	-pids "floor=$FLOOR_PID" -json "$DIR/floor.json"

SOLD_OUT_MAX="$(json_number "$DIR/sold-out.json" rps)"
for pct in $OPEN_PERCENTS; do
	rate="$(share "$SOLD_OUT_MAX" "$pct")"
	[[ "$rate" -gt 0 ]] || die "no sold-out rate to take $pct% of"
	log "sold out, open loop at $pct% of surge's max: $rate/s for ${OPEN_S}s, surge then the floor"
	bin/loadgen run -label "sold_out_open_$pct" -sku "$SOLD_OUT_SKU" -c "$C" -rate "$rate" -d "${OPEN_S}s" \
		-pids "$PIDS_FLAG" -json "$DIR/sold-out-open-$pct.json"
	bin/loadgen run -label "floor_open_$pct" -url "http://$FLOOR_ADDR" -sku "$SOLD_OUT_SKU" -c "$C" -rate "$rate" \
		-d "${OPEN_S}s" -pids "floor=$FLOOR_PID" -json "$DIR/floor-open-$pct.json"
done
stop_pid "$FLOOR_PID"

# redis_stats FILE resets (no FILE) or writes (FILE) every cluster node's command counts, so the
# sustained load's Redis calls per accepted order can be read off (commandstats-sustained.txt).
redis_stats() {
	local p
	for p in 7000 7001 7002 7003 7004 7005; do
		if [[ -z "${1:-}" ]]; then
			rcli "$p" config resetstat >/dev/null 2>&1 || true
		else
			rcli "$p" info commandstats 2>/dev/null | sed -n "s/^cmdstat_/$p /p" >>"$1" || true
		fi
	done
}
rcli() { REDISCLI_AUTH="${SURGE_REDIS_PASSWORD:-surge}" redis-cli --no-auth-warning -p "$@"; }

log "surge sustained load: every order accepted, ${SUSTAINED_S}s, $C concurrent"
redis_stats
bin/loadgen run -label sustained -sku "sustained-$RUN" -stock 100000000 -c "$C" -d "${SUSTAINED_S}s" \
	-check -queue "$SURGE_AMQP_QUEUE" -sample 500ms -drain-timeout 60s -pids "$PIDS_FLAG" \
	-json "$DIR/sustained.json" -cpuprofile "$(profiles sustained)" -cpuprofile-dir "$DIR/pprof"
redis_stats "$DIR/commandstats-sustained.txt"

ACCEPTED_MAX="$(awk -v a="$(json_number "$DIR/sustained.json" accepted)" -v s="$(json_number "$DIR/sustained.json" seconds)" \
	'BEGIN { if (s > 0) printf "%d", a / s; else print 0 }')"
for pct in $OPEN_PERCENTS; do
	rate="$(share "$ACCEPTED_MAX" "$pct")"
	[[ "$rate" -gt 0 ]] || die "no sustained accepted rate to take $pct% of"
	log "accepting, open loop at $pct% of its max ($ACCEPTED_MAX accepted/s): $rate/s for ${OPEN_S}s"
	bin/loadgen run -label "accepting_open_$pct" -sku "accepting-$pct-$RUN" -stock 100000000 -c "$C" -rate "$rate" \
		-d "${OPEN_S}s" -check -queue "$SURGE_AMQP_QUEUE" -drain-timeout 60s -pids "$PIDS_FLAG" \
		-json "$DIR/accepting-open-$pct.json"
done

stop_pid "$GATEWAY_PID"
stop_pid "$WORKER_PID"
for f in "$DIR"/pprof/*.cpu.pb.gz; do
	[[ -s "$f" ]] || continue
	bin="bin/$(basename "$f" | cut -d- -f1)"
	go tool pprof -top -cum -nodecount=40 "$bin" "$f" >"${f%.pb.gz}.txt" 2>/dev/null || true
done
# Where the goroutines were, largest groups first: the waits a CPU profile does not show.
for f in "$DIR"/pprof/*.goroutines.txt; do
	[[ -s "$f" ]] || continue
	# The dump's first group shares its paragraph with the "goroutine profile" header line.
	awk -v RS= -F'\n' '{ sub(/^goroutine profile: [^\n]*\n/, "") } /^[0-9]+ @/ {
		out = ""; c = 0; own = ""
		for (i = 2; i <= NF; i++) if ($i ~ /^#/) {
			split($i, w, /[ \t]+/)
			if (c++ < 3) out = out (c > 1 ? " <- " : "") w[3]
			else if (own == "" && w[3] ~ /^surge\// && w[3] !~ /^surge\/pkg\/(cluster|metrics)\./) own = w[3]
		}
		print $1 + 0 "\t" out (own != "" ? " <- ... <- " own : "")
	}' "$f" | sort -rn | head -n 8 >"${f%.txt}.top.txt"
done

log "report"
bin/loadgen report -dir "$DIR"
if ((RECORD)); then
	mkdir -p bench
	cp "$DIR/results.json" "$DIR/table.txt" "$DIR/latency.svg" "$DIR/openloop.svg" "$DIR/sustained.svg" bench/
	cp "$DIR"/pprof/*.cpu.txt "$DIR"/pprof/*.goroutines.top.txt bench/ 2>/dev/null || true
	log "recorded in bench/"
fi
printf '\nresults: %s/results.json, plots: %s/latency.svg %s/openloop.svg %s/sustained.svg, profiles: %s/pprof/\n' \
	"$DIR" "$DIR" "$DIR" "$DIR" "$DIR"
