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
	"math/rand/v2"
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
	now      func() time.Time
	interval int64 // microseconds between requests at the customer's rate
	burst    int   // 0: no customer limit
}

// New returns Records on rdb; ttl <= 0 means 24h. The TTL is also the
// length of the windows order ids are derived in (order.Window).
func New(rdb redis.Cmdable, ttl time.Duration) *Records {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &Records{rdb: rdb, ttl: ttl, now: time.Now}
}

// WithClock returns Records that read the time from now (tests).
func (r *Records) WithClock(now func() time.Time) *Records {
	c := *r
	c.now = now
	return &c
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
// a reservation (see Claim). SKUs and customer ids never contain it, nor
// nonceMark, which separates the fingerprint from the nonce of the call
// that created the record.
const (
	soldOutMark = "!"
	nonceMark   = "#"
)

// Claim spends one request of o.CustomerID's budget (when Limited) and
// claims the idempotency record of (o.CustomerID, key), in one call. It
// returns the order id: the one of the window the key was first used in,
// when its record is alive, else a new one in the current window (a key
// reused after its record expired names a new order). first is true when
// no record existed; a record with the same fingerprint is a retry (first
// false, nil error); another fingerprint returns
// order.ErrIdempotencyMismatch. An empty budget returns a
// *order.RateLimitedError and changes nothing. o.ID is ignored.
//
// soldOut records a new claim as answered sold out, for an order the
// gateway refuses without running the reserve script; a later claim of
// that record (a retry) returns order.ErrSoldOut, so the retry gets the
// first answer again whatever the stock is by then.
//
// The call is safe to repeat (go-redis retries a script whose reply timed
// out): a record made by this very call is reported as made by it, and
// the budget is spent once.
func (r *Records) Claim(ctx context.Context, o order.Order, key string, soldOut bool) (id string, first bool, err error) {
	fp := o.Fingerprint()
	val := fp
	if soldOut {
		val = soldOutMark + fp
	}
	ids := r.windowIDs(o.CustomerID, key)
	ks := []string{keys.CustomerRate(o.CustomerID), keys.Idem(ids[0]), keys.Idem(ids[1]), keys.Idem(ids[2])}
	res, err := lua.Admit.Run(ctx, r.rdb, ks, r.interval, r.burst, val, r.ttl.Milliseconds(), newNonce()).Slice()
	if err != nil {
		return "", false, fmt.Errorf("claim idempotency record customer=%s: %w", o.CustomerID, err)
	}
	if ok, _ := res[0].(int64); ok != 1 && len(res) == 2 {
		after, _ := res[1].(int64)
		return "", false, fmt.Errorf("customer %s: %w", o.CustomerID, &order.RateLimitedError{RetryAfter: time.Duration(after) * time.Microsecond})
	}
	var i int64
	if len(res) == 3 {
		i, _ = res[1].(int64)
	}
	if i < 1 || i > 3 {
		return "", false, fmt.Errorf("claim idempotency record customer=%s: unexpected reply %v", o.CustomerID, res)
	}
	id = ids[i-1]
	old, found := res[2].(string)
	if !found {
		return id, true, nil
	}
	oldFP, wasSoldOut := strings.CutPrefix(fingerprint(old), soldOutMark)
	if oldFP != fp {
		return id, false, fmt.Errorf("order=%s: %w", id, order.ErrIdempotencyMismatch)
	}
	if wasSoldOut {
		return id, false, fmt.Errorf("order=%s was answered sold out: %w", id, order.ErrSoldOut)
	}
	return id, false, nil
}

// Existing tells whether the key of o.CustomerID names an order now (its
// record lives), without claiming anything, and returns that order's id,
// or the id a claim would create now. It reads only, so it also answers
// when Redis refuses writes (maxmemory reached).
func (r *Records) Existing(ctx context.Context, o order.Order, key string) (id string, found bool, err error) {
	ids := r.windowIDs(o.CustomerID, key)
	vals, err := r.rdb.MGet(ctx, keys.Idem(ids[0]), keys.Idem(ids[1]), keys.Idem(ids[2])).Result()
	if err != nil {
		return ids[1], false, fmt.Errorf("look up idempotency records customer=%s: %w", o.CustomerID, err)
	}
	for i, v := range vals {
		if v != nil {
			return ids[i], true, nil
		}
	}
	return ids[1], false, nil
}

// windowIDs are the ids the key names in the windows before, at and after
// the current one: a live record is under one of them.
func (r *Records) windowIDs(customer, key string) [3]string {
	w := order.Window(r.now(), r.ttl)
	return [3]string{order.IDFor(customer, key, w-1), order.IDFor(customer, key, w), order.IDFor(customer, key, w+1)}
}

// fingerprint strips the creating call's nonce from a record.
func fingerprint(record string) string {
	if i := strings.LastIndex(record, nonceMark); i >= 0 {
		return record[:i]
	}
	return record
}

// newNonce returns 8 random hex characters: enough to tell one call from
// the others that claim the same key.
func newNonce() string {
	return strconv.FormatUint(uint64(rand.Uint32())|1<<32, 16)[1:]
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
	parts := strings.SplitN(strings.TrimPrefix(fingerprint(fp), soldOutMark), "|", 3)
	if len(parts) != 3 {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q", id, fp)
	}
	qty, err := strconv.Atoi(parts[1])
	if err != nil {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q: %w", id, fp, err)
	}
	return order.Order{ID: id, SKU: parts[0], Qty: qty, CustomerID: parts[2]}, nil
}
