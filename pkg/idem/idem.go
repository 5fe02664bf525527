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
	now      func() time.Time
	interval int64 // microseconds between requests at the customer's rate
	burst    int   // 0: no customer limit
}

// New returns Records on rdb; ttl <= 0 means 24h. The TTL is also the
// length of the windows order ids are derived in (order.KeyWindow: each
// key's own, shifted by its phase).
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

// ScopeCustomer names the customer's budget in rate-limit answers.
const ScopeCustomer = "customer"

// soldOutMark prefixes the records that gateways from before sold-out
// answers left no record wrote for such an answer: read as unmarked (the
// key names no reserved order by it, and a retry is a new attempt).
// nonceMark separates the fingerprint from the nonce of the call that
// made the record (lua/admit.lua). SKUs and customer ids contain neither.
const (
	soldOutMark = "!"
	nonceMark   = "#"
)

// Claim spends one request of o.CustomerID's budget (when Limited) and
// claims the idempotency record of (o.CustomerID, key), in one call. The
// claim names the order: the one of the window the key was first used in,
// when its record lives, else a new one in the current window (a key
// reused after its record expired names a new order). o.ID is ignored.
//
// Created is true when this call made the record. A record with the same
// fingerprint is a retry (Created false, nil error); another fingerprint
// returns order.ErrIdempotencyMismatch. An empty budget returns a
// *order.RateLimitedError and changes nothing, unless the key names an
// order of this body that may be taken: then the outcome is unknown (an
// *order.UnknownOutcomeError), since "not taken" would not be true of it.
//
// The call is safe to repeat (go-redis resends a script whose reply timed
// out): a record made by this very call is reported as made by it, and
// the budget is spent once.
func (r *Records) Claim(ctx context.Context, o order.Order, key string) (order.Claim, error) {
	fp := o.Fingerprint()
	phase, w, ids, ks := claimKeys(o.CustomerID, key, r.now(), r.ttl)
	c := order.Claim{Nonce: order.Nonce()}
	res, err := lua.Admit.Run(ctx, r.rdb, ks, r.interval, r.burst, fp, r.ttl.Milliseconds(), c.Nonce, w,
		phase.Milliseconds()).Slice()
	if err != nil {
		return c, fmt.Errorf("claim idempotency record customer=%s: %w", o.CustomerID, err)
	}
	code, i, rec, err := admitReply(res)
	if err != nil {
		return c, fmt.Errorf("claim idempotency record customer=%s: %w", o.CustomerID, err)
	}
	if code == 0 {
		return r.refused(c, o, ids, res)
	}
	c.OrderID = ids[i-1]
	if code == 1 {
		c.Created = true
		return c, nil
	}
	if strings.TrimPrefix(fingerprint(rec), soldOutMark) != fp {
		return c, fmt.Errorf("order=%s: %w", c.OrderID, order.ErrIdempotencyMismatch)
	}
	return c, nil
}

// refused answers a claim over the customer's budget: not taken, unless
// the key already names an order with this body that may be taken.
func (r *Records) refused(c order.Claim, o order.Order, ids []string, res []any) (order.Claim, error) {
	wait, _ := res[1].(int64)
	idx, _ := res[2].(int64)
	rec, _ := res[3].(string)
	limited := &order.RateLimitedError{RetryAfter: time.Duration(wait) * time.Microsecond, Scope: ScopeCustomer}
	if idx < 1 || idx > 4 || rec == "" {
		return order.Claim{}, fmt.Errorf("customer %s: %w", o.CustomerID, limited)
	}
	if fingerprint(rec) != o.Fingerprint() {
		return order.Claim{}, fmt.Errorf("customer %s: %w", o.CustomerID, limited) // sold out, or another body
	}
	c.OrderID = ids[idx-1]
	return c, &order.UnknownOutcomeError{OrderID: c.OrderID, RetryAfter: max(limited.RetryAfter, time.Second),
		Cause: fmt.Errorf("retry over the customer's budget: %w", limited)}
}

// claimKeys derives what a claim at now sends lua/admit.lua: the key's
// phase and window, the ids the key names in the windows from two before
// to one after it, and the keys: the customer's rate budget, then each
// id's record.
func claimKeys(customerID, key string, now time.Time, ttl time.Duration) (time.Duration, int64, []string, []string) {
	phase := order.Phase(customerID, key, ttl)
	w := order.Window(now.Add(phase), ttl)
	ids := order.IDsFor(customerID, key, w-2, 4)
	ks := make([]string, 1, 1+len(ids))
	ks[0] = keys.CustomerRateOf(ids[0], customerID)
	for _, id := range ids {
		ks = append(ks, keys.Idem(id))
	}
	return phase, w, ids, ks
}

// admitReply reads lua/admit.lua's reply: its code and, unless the call
// was over budget (code 0), the record's index and the record found.
func admitReply(res []any) (code, i int64, rec string, err error) {
	if len(res) < 3 {
		return 0, 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	code, _ = res[0].(int64)
	if code == 0 {
		if len(res) != 4 {
			return 0, 0, "", fmt.Errorf("unexpected reply %v", res)
		}
		return 0, 0, "", nil
	}
	i, _ = res[1].(int64)
	rec, _ = res[2].(string)
	if code < 1 || code > 2 || i < 1 || i > 4 {
		return 0, 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	return code, i, rec, nil
}

// fingerprint is a record without the nonce of the call that made it.
func fingerprint(rec string) string {
	if i := strings.LastIndex(rec, nonceMark); i >= 0 {
		return rec[:i]
	}
	return rec
}

// Existing reads, without claiming anything, whether the key of
// o.CustomerID names an order that may be taken (a live record of o's
// body not marked sold out), and that order's id, or the id a claim would
// create now. The master's clock decides the window, as it does for a
// claim (lua/existing.lua), so a gateway whose clock is off finds the
// record a claim would find: the "not taken" answers rest on it. It reads
// only, so it also answers when Redis refuses writes (maxmemory reached).
//
// On an error the id is the one of this clock's window: the best guess
// for the order an unknown outcome names.
func (r *Records) Existing(ctx context.Context, o order.Order, key string) (id string, open bool, err error) {
	phase := order.Phase(o.CustomerID, key, r.ttl)
	w := order.Window(r.now().Add(phase), r.ttl)
	guess := order.IDFor(o.CustomerID, key, w)
	for range 2 {
		ids := order.IDsFor(o.CustomerID, key, w-2, 4)
		ks := make([]string, len(ids))
		for i, id := range ids {
			ks[i] = keys.Idem(id)
		}
		res, err := lua.Existing.Run(ctx, r.rdb, ks, r.ttl.Milliseconds(), w, phase.Milliseconds()).Slice()
		if err != nil {
			return guess, false, fmt.Errorf("look up idempotency records customer=%s: %w", o.CustomerID, err)
		}
		i, rest, err := existingReply(res)
		if err != nil {
			return guess, false, fmt.Errorf("look up idempotency records customer=%s: %w", o.CustomerID, err)
		}
		if i == 0 { // the master's window is too far from this clock's
			w, _ = rest.(int64)
			continue
		}
		rec, ok := rest.(string)
		return ids[i-1], ok && fingerprint(rec) == o.Fingerprint(), nil
	}
	return guess, false, fmt.Errorf("look up idempotency records customer=%s: the master's window moved twice", o.CustomerID)
}

// existingReply reads lua/existing.lua's reply: the record's index (0:
// ask again with the master's window, the second element) and the rest.
func existingReply(res []any) (int64, any, error) {
	if len(res) < 1 || len(res) > 2 {
		return 0, nil, fmt.Errorf("unexpected reply %v", res)
	}
	i, ok := res[0].(int64)
	if !ok || i < 0 || i > 4 {
		return 0, nil, fmt.Errorf("unexpected reply %v", res)
	}
	var rest any
	if len(res) == 2 {
		rest = res[1]
	}
	return i, rest, nil
}

// Forget deletes the record c made, for an order that was certainly not
// taken, so the key is free again. It reports false, changing nothing,
// when the record is gone or another call made it.
func (r *Records) Forget(ctx context.Context, c order.Claim) (bool, error) {
	return r.change(ctx, c, "forget")
}

func (r *Records) change(ctx context.Context, c order.Claim, op string) (bool, error) {
	n, err := lua.Record.Run(ctx, r.rdb, []string{keys.Idem(c.OrderID)}, c.Nonce, op).Int64()
	if err != nil {
		return false, fmt.Errorf("%s idempotency record order=%s: %w", op, c.OrderID, err)
	}
	return n == 1, nil
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
