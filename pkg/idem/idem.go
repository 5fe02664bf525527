// Package idem keeps the gateway's idempotency records in Redis: for each
// order id (derived from customer and Idempotency-Key) the fingerprint of
// the request that created it. A reused key with another body is refused;
// the record also tells GET /v1/orders/{id} which SKU an order is for.
// Records expire with the idempotency window, so memory stays bounded.
//
// A record lives on its customer's slot (keys.Idem) beside the customer's
// rate budget (keys.CustomerRate): one script (lua/admit.lua) spends the
// budget and claims the record, one Redis call per order.
package idem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// Records stores idempotency records.
type Records struct {
	rdb      redis.Cmdable
	ttl      time.Duration
	interval int64 // microseconds between requests at the customer's rate
	burst    int   // 0: no customer limit
}

// New returns Records on rdb; ttl <= 0 means 24h.
func New(rdb redis.Cmdable, ttl time.Duration) *Records {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &Records{rdb: rdb, ttl: ttl}
}

// Limited returns Records that also hold each customer to rate requests
// per second with the given burst (at least 1) before claiming. A rate
// that is not positive means no limit.
func (r *Records) Limited(rate float64, burst int) *Records {
	c := *r
	c.interval, c.burst = 0, 0
	if rate > 0 {
		c.interval = int64(math.Max(1, math.Round(1e6/rate)))
		c.burst = max(burst, 1)
	}
	return &c
}

// soldOutMark prefixes the record of an order answered sold out without
// a reservation (see Claim). SKUs and customer ids never contain it.
const soldOutMark = "!"

// Claim spends one request of o.CustomerID's budget (when Limited) and
// records o as the request behind o.ID, in one call. first is true when no
// record existed; a record with the same fingerprint is a retry (first
// false, nil error); another fingerprint returns
// order.ErrIdempotencyMismatch. An empty budget returns a
// *order.RateLimitedError and changes nothing.
//
// soldOut records a new claim as answered sold out, for an order the
// gateway refuses without running the reserve script; a later claim of
// that record (a retry) returns order.ErrSoldOut, so the retry gets the
// first answer again whatever the stock is by then.
func (r *Records) Claim(ctx context.Context, o order.Order, soldOut bool) (first bool, err error) {
	fp := o.Fingerprint()
	val := fp
	if soldOut {
		val = soldOutMark + fp
	}
	ks := []string{keys.CustomerRate(o.CustomerID), keys.Idem(o.ID)}
	res, err := lua.Admit.Run(ctx, r.rdb, ks, r.interval, r.burst, val, r.ttl.Milliseconds()).Slice()
	if err != nil {
		return false, fmt.Errorf("claim idempotency record order=%s: %w", o.ID, err)
	}
	if len(res) != 2 {
		return false, fmt.Errorf("claim idempotency record order=%s: unexpected reply %v", o.ID, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		after, _ := res[1].(int64)
		return false, fmt.Errorf("customer %s: %w", o.CustomerID, &order.RateLimitedError{RetryAfter: time.Duration(after) * time.Microsecond})
	}
	switch old := res[1].(type) {
	case nil:
		return true, nil
	case string:
		oldFP, wasSoldOut := strings.CutPrefix(old, soldOutMark)
		if oldFP != fp {
			return false, fmt.Errorf("order=%s: %w", o.ID, order.ErrIdempotencyMismatch)
		}
		if wasSoldOut {
			return false, fmt.Errorf("order=%s was answered sold out: %w", o.ID, order.ErrSoldOut)
		}
		return false, nil
	}
	return false, fmt.Errorf("claim idempotency record order=%s: unexpected reply %v", o.ID, res)
}

// Forget deletes the record of an order that was never accepted (its
// publish failed), so the key is free again.
func (r *Records) Forget(ctx context.Context, orderID string) error {
	if err := r.rdb.Del(ctx, keys.Idem(orderID)).Err(); err != nil {
		return fmt.Errorf("forget idempotency record order=%s: %w", orderID, err)
	}
	return nil
}

// Lookup returns the order recorded under id, or order.ErrNotFound.
func (r *Records) Lookup(ctx context.Context, id string) (order.Order, error) {
	fp, err := r.rdb.Get(ctx, keys.Idem(id)).Result()
	if errors.Is(err, redis.Nil) {
		return order.Order{}, fmt.Errorf("order=%s: %w", id, order.ErrNotFound)
	}
	if err != nil {
		return order.Order{}, fmt.Errorf("look up order=%s: %w", id, err)
	}
	parts := strings.SplitN(strings.TrimPrefix(fp, soldOutMark), "|", 3)
	if len(parts) != 3 {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q", id, fp)
	}
	qty, err := strconv.Atoi(parts[1])
	if err != nil {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q: %w", id, fp, err)
	}
	return order.Order{ID: id, SKU: parts[0], Qty: qty, CustomerID: parts[2]}, nil
}
