#!/usr/bin/env bash
# limit-lowered.sh: a black-box check that an operator lowering a purchase limit mid-sale turns
# none of the orders already answered 202 into a rejection. A SKU of 10 units is loaded with a
# limit of 5 per customer; the worker is paused (SIGSTOP), so accepted orders wait in the queue;
# one customer posts three orders with three keys (202 each); the operator lowers the limit to 2
# (200), and the customer's fourth order is answered 409 purchase_limit; the worker resumes
# (SIGCONT). It checks:
#
#   - the three orders answered 202 are invoiced (the README: an order keeps the limit it was
#     accepted under; a limit changed after a 202 never rejects it);
#   - the fourth, answered 409 purchase_limit, is not.
#
#   deploy/repro/limit-lowered.sh                        exit 0: the promise held; 1: it did not
#   SURGE_REPRO_TARGET=up deploy/repro/limit-lowered.sh  the same against `make up` (as root: the
#                                                        worker runs as its own user)
#
# Environment: SURGE_REPRO_TARGET (private; pipeline.sh says what each means), SURGE_REPRO_DIR,
# SURGE_WORKER_METRICS_ADDR (up: how the worker is found, 127.0.0.1:9101).
set -euo pipefail

# shellcheck source=deploy/repro/pipeline.sh
source "$(dirname "${BASH_SOURCE[0]}")/pipeline.sh"
command -v ss >/dev/null || die "ss is not installed"

use_pipeline
SKU="limit-$(date +%s)-$$"
ANN="ann-$$x$(date +%s)"
load_sku "$SKU" '{"stock":10,"name":"limit","price_cents":100,"max_per_customer":5}'
log "$SKU: 10 units, a purchase limit of 5 per customer"

# order KEY prints: key status code order_id.
order() {
	local out status body
	out=$(curl -sS -m 20 -w '\n%{http_code}' -X POST "http://$HTTP/v1/orders" \
		-H 'Content-Type: application/json' -H "Idempotency-Key: $1" \
		-d "{\"sku\":\"$SKU\",\"qty\":1,\"customer_id\":\"$ANN\"}" 2>/dev/null) || out=$'\n000'
	status=${out##*$'\n'}
	body=${out%$'\n'*}
	printf '%s %s %s %s\n' "$1" "$status" "$(jq -r '.error.code // "-"' <<<"$body" 2>/dev/null || echo -)" \
		"$(jq -r '.order_id // .error.order_id // "-"' <<<"$body" 2>/dev/null || echo -)"
}

WORKER=$(worker_pid)
kill -STOP "$WORKER"
on_exit "kill -CONT $WORKER 2>/dev/null"
log "worker (pid $WORKER) paused"
for k in k1 k2 k3; do order "$ANN-$k"; done >"$DIR/accepted"
log "customer $ANN, three keys: $(awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $4}' "$DIR/accepted")"
[[ $(awk '$2 == "202"' "$DIR/accepted" | wc -l) == 3 ]] || die "want three 202s: $(cat "$DIR/accepted")"

status=$(curl -sS -m 10 -o "$DIR/lower.json" -w '%{http_code}' -X PUT "http://$ADMIN/v1/admin/stock/$SKU" \
	-H "Authorization: Bearer $TOKEN" -d '{"stock":10,"name":"limit","price_cents":100,"max_per_customer":2}')
[[ $status == 200 ]] || die "lowering the limit: $status $(cat "$DIR/lower.json")"
log "limit lowered to 2: $status"
order "$ANN-k4" >"$DIR/after"
log "the customer's fourth order: $(awk '{print $2, $3}' "$DIR/after")"

kill -CONT "$WORKER"
log "worker resumed"
ids=$(awk '$2 == "202" {printf "%s\x27%s\x27", (n++ ? "," : ""), $4}' "$DIR/accepted")
deadline=$((SECONDS + 60))
until [[ $(sql -N "$DB" -e "SELECT COUNT(*) FROM orders WHERE order_id IN ($ids)") == 3 ]]; do
	((SECONDS < deadline)) || break
	sleep 0.5
done
sql -N "$DB" -e "SELECT order_id, status, COALESCE(reason, '-') FROM orders WHERE sku = '$SKU'" | sort >"$DIR/mysql"
awk 'FILENAME == ARGV[1] {row[$1] = $2 " " $3; next}
	$2 == "202" && row[$4] != "invoiced -" { print "BROKEN: " $1 " was answered 202 for " $4 ", MySQL holds " ($4 in row ? row[$4] : "nothing") }
	$2 != "202" && ($4 in row) && row[$4] ~ /^invoiced/ { print "BROKEN: " $1 " was answered " $2 " " $3 ", MySQL invoiced " $4 }' \
	"$DIR/mysql" "$DIR/accepted" "$DIR/after" >"$DIR/broken"
awk -v me="$(basename "$0" .sh)" '{print me ": MySQL: " $1 " " $2 " " $3}' "$DIR/mysql" >&2
sed "s/^/$(basename "$0" .sh): /" "$DIR/broken" >&2
fourth=$(awk '{print $2 " " $3}' "$DIR/after")
invoiced=$(awk '$2 == "invoiced"' "$DIR/mysql" | wc -l)
log "answered 202 and invoiced: $invoiced of 3; fourth order $fourth; broken promises: $(wc -l <"$DIR/broken")"
if [[ $fourth == "409 purchase_limit" && $invoiced == 3 && ! -s $DIR/broken ]]; then RESULT=0; else RESULT=1; fi
exit "$RESULT"
