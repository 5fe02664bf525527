#!/usr/bin/env bash
# smoke.sh: the README's quick-start example against a running pipeline
# (after `make up`): load stock, post an order, poll until it is invoiced,
# and check Redis and MySQL agree. Exits non-zero with the reason otherwise.
set -euo pipefail

BASE="http://${SURGE_HTTP_ADDR:-127.0.0.1:8080}"
ADMIN="http://${SURGE_ADMIN_ADDR:-127.0.0.1:8081}"
TOKEN="${SURGE_ADMIN_TOKEN:-surge-admin}"
SKU="smoke-$(date +%s)-$$"
KEY="smoke-key-$$-$RANDOM"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "smoke: $*" >&2; exit 1; }

echo "smoke: load 100 units of $SKU"
curl -fsS -X PUT "$ADMIN/v1/admin/stock/$SKU" -H "Authorization: Bearer $TOKEN" \
  -d '{"stock":100,"name":"T-shirt","price_cents":1999}' >/dev/null || fail "stock load failed"

echo "smoke: post an order"
answer=$(curl -sS -w '\n%{http_code}' -X POST "$BASE/v1/orders" \
  -H 'Content-Type: application/json' -H "Idempotency-Key: $KEY" \
  -d "{\"sku\":\"$SKU\",\"qty\":2,\"customer_id\":\"alice-$$\"}")
code=${answer##*$'\n'}; body=${answer%$'\n'*}
[ "$code" = 202 ] || fail "POST /v1/orders answered $code: $body"
id=$(sed -n 's/.*"order_id":"\([^"]*\)".*/\1/p' <<<"$body")
[ -n "$id" ] || fail "no order_id in $body"
echo "smoke: accepted $id"

for _ in $(seq 1 100); do
  status=$(curl -fsS "$BASE/v1/orders/$id" | sed -n 's/.*"status":"\([^"]*\)".*/\1/p')
  [ "$status" = invoiced ] && break
  sleep 0.1
done
[ "$status" = invoiced ] || fail "order $id is $status, not invoiced, after 10 s"
echo "smoke: $id invoiced"

show=$(bin/opsctl stock show "$SKU" --json)
grep -q '"consistent": true' <<<"$show" || fail "stock not consistent: $show"
echo "smoke: ok (Redis and MySQL agree: 98 available, 2 sold)"
