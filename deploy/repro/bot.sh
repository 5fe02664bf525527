#!/usr/bin/env bash
# bot.sh: a black-box check that a client hammering the gateway cannot keep restocked units from
# other buyers. A SKU of 5 units sells out and the gateway learns it; one client (one customer,
# a new key per order) then sends orders at SURGE_REPRO_BOT_RATE (800/s), answered 409 sold_out
# from reads of the SKU (no write, no budget spent) while it is sold out; 1 s later an operator
# restocks 5 more units, and from then on the client's orders go the full way and meet its
# budget (429); other buyers order one unit each (a new customer every 20 ms) for 5 s. It checks:
#
#   - the 5 restocked units are sold within those 5 s (the README: a `409 sold_out` comes from a
#     sighting made while the order was being answered, however many clients are refused);
#   - every buyer answered 202 is invoiced and no buyer answered 409 is.
#
# It prints who got the units: the buyers or the hammering client (whose own per-customer rate
# budget, and the SKU's purchase limit when one is set, bound its share).
#
#   deploy/repro/bot.sh                        exit 0: the units were sold; 1: they were not
#   SURGE_REPRO_TARGET=up deploy/repro/bot.sh  the same against `make up`
#
# Environment: SURGE_REPRO_TARGET (private; pipeline.sh says what each means),
# SURGE_REPRO_BOT_RATE (800), SURGE_REPRO_BUYERS (214, one every 20 ms), SURGE_REPRO_DIR,
# SURGE_REPRO_MAX_PER_CUSTOMER (none: the SKU's purchase limit per customer, set with its first load;
# the restock keeps it).
set -euo pipefail

RATE="${SURGE_REPRO_BOT_RATE:-800}"
BUYERS="${SURGE_REPRO_BUYERS:-214}"
LIMIT="${SURGE_REPRO_MAX_PER_CUSTOMER:-}"
# shellcheck source=deploy/repro/pipeline.sh
source "$(dirname "${BASH_SOURCE[0]}")/pipeline.sh"
[[ -x $REPO_ROOT/bin/loadgen ]] || die "bin/loadgen is not built (make build)"

use_pipeline
SKU="bot-$(date +%s)-$$"
RUN="r$$x$(date +%s)"
mkdir -p "$DIR/buyers"
if [[ -n $LIMIT ]]; then
	[[ $LIMIT =~ ^[0-9]+$ ]] || die "SURGE_REPRO_MAX_PER_CUSTOMER must be a whole number, not '$LIMIT'"
	load_sku "$SKU" "{\"stock\":5,\"name\":\"bot\",\"price_cents\":100,\"max_per_customer\":$LIMIT}"
	log "$SKU: a purchase limit of $LIMIT per customer"
else
	load_sku "$SKU" '{"stock":5,"name":"bot","price_cents":100}'
fi

# order CUSTOMER prints: customer status code order_id.
order() {
	local out status body
	out=$(curl -sS -m 20 -w '\n%{http_code}' -X POST "http://$HTTP/v1/orders" \
		-H 'Content-Type: application/json' -H "Idempotency-Key: k-$1" \
		-d "{\"sku\":\"$SKU\",\"qty\":1,\"customer_id\":\"$1\"}" 2>/dev/null) || out=$'\n000'
	status=${out##*$'\n'}
	body=${out%$'\n'*}
	printf '%s %s %s %s\n' "$1" "$status" "$(jq -r '.error.code // "-"' <<<"$body" 2>/dev/null || echo -)" \
		"$(jq -r '.order_id // .error.order_id // "-"' <<<"$body" 2>/dev/null || echo -)"
}

for i in 1 2 3 4 5 6 7; do order "$RUN-first-$i"; done >"$DIR/first"
first_sold=$(awk '$2 == "202"' "$DIR/first" | wc -l)
[[ $first_sold == 5 ]] || die "the first 7 buyers got $first_sold units of 5: $(cat "$DIR/first")"
log "$SKU: 5 units sold, 2 buyers answered $(awk 'NR > 5 {printf "%s %s, ", $2, $3}' "$DIR/first")"

log "hammering at $RATE orders/s as customer $RUN-bot"
SURGE_HTTP_ADDR=$HTTP SURGE_ADMIN_ADDR=$ADMIN "$REPO_ROOT/bin/loadgen" run -sku "$SKU" -customer "$RUN-bot" \
	-run-id "$RUN" -rate "$RATE" -c 64 -d $((BUYERS / 50 + 3))s -quiet -json "$DIR/bot.json" >"$DIR/bot.log" 2>&1 &
BOT=$!
on_exit "kill $BOT 2>/dev/null"
sleep 1
load_sku "$SKU" '{"stock":10,"name":"bot","price_cents":100}'
log "restocked to 10; $BUYERS buyers order, one every 20 ms"
BUYER_PIDS=()
for i in $(seq 1 "$BUYERS"); do
	order "$RUN-b$i" >"$DIR/buyers/$i" &
	BUYER_PIDS+=($!)
	sleep 0.02
done
for pid in "${BUYER_PIDS[@]}"; do wait "$pid" || true; done
wait "$BOT" || die "the hammering client failed: $(tail -n 5 "$DIR/bot.log")"
cat "$DIR"/buyers/* >"$DIR/answers"

bot_got=$(jq -r '.load.counts.status["202"] // 0' "$DIR/bot.json" 2>/dev/null || echo "?")
bot_429=$(jq -r '.load.counts.status["429"] // 0' "$DIR/bot.json" 2>/dev/null || echo "?")
bot_409=$(jq -r '.load.counts.status["409"] // 0' "$DIR/bot.json" 2>/dev/null || echo "?")
buyers_got=$(awk '$2 == "202"' "$DIR/answers" | wc -l)
log "buyers: $(awk '{k = $2 " " $3; n[k]++} END {for (k in n) printf "%s: %d, ", k, n[k]}' "$DIR/answers")"
log "hammering client: $bot_got answered 202, $bot_409 answered 409, $bot_429 answered 429"

# After the sale: every buyer's 202 invoiced, no 409 invoiced (the worker is quick; 60 s at most).
deadline=$((SECONDS + 60))
until [[ $(sql -N "$DB" -e "SELECT COALESCE(SUM(status = 'invoiced'), 0) FROM orders WHERE sku = '$SKU'") -ge $((5 + buyers_got)) ]]; do
	((SECONDS < deadline)) || break
	sleep 1
done
sql -N "$DB" -e "SELECT customer_id, order_id, status FROM orders WHERE sku = '$SKU'" | sort >"$DIR/mysql"
awk 'FILENAME == ARGV[1] {inv[$1] = $2 " " $3; next}
	$2 == "202" && inv[$1] != $4 " invoiced" { print "BROKEN: " $1 " was answered 202 for " $4 ", MySQL holds " ($1 in inv ? inv[$1] : "nothing") }
	$2 == "409" && ($1 in inv) { print "BROKEN: " $1 " was answered 409 " $3 ", MySQL holds " inv[$1] }' \
	"$DIR/mysql" "$DIR/answers" >"$DIR/broken"
sold=$(sql -N "$DB" -e "SELECT sold FROM products WHERE sku = '$SKU'")
after=$((sold - 5))
sed "s/^/$(basename "$0" .sh): /" "$DIR/broken" >&2
log "restocked units sold: $after of 5 (buyers $buyers_got, hammering client $bot_got); broken promises: $(wc -l <"$DIR/broken")"
if [[ $after == 5 && ! -s $DIR/broken ]]; then RESULT=0; else RESULT=1; fi
exit "$RESULT"
