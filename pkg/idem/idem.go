// Package idem keeps the gateway's idempotency records in Redis: for each
// order id (derived from customer and Idempotency-Key) the fingerprint of
// the request that created it. A reused key with another body is refused;
// the record also tells GET /v1/orders/{id} which SKU an order is for.
// Records expire with the idempotency window, so memory stays bounded.
package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/keys"
	"surge/pkg/order"
)

// Records stores idempotency records.
type Records struct {
	rdb redis.Cmdable
	ttl time.Duration
}

// New returns Records on rdb; ttl <= 0 means 24h.
func New(rdb redis.Cmdable, ttl time.Duration) *Records {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &Records{rdb: rdb, ttl: ttl}
}

// Claim records o as the request behind o.ID. first is true when no record
// existed; a record with the same fingerprint is a retry (first false, nil
// error); another fingerprint returns order.ErrIdempotencyMismatch.
func (r *Records) Claim(ctx context.Context, o order.Order) (first bool, err error) {
	fp := o.Fingerprint()
	old, err := r.rdb.SetArgs(ctx, keys.Idem(o.ID), fp, redis.SetArgs{Mode: "NX", Get: true, TTL: r.ttl}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("claim idempotency record order=%s: %w", o.ID, err)
	case old != fp:
		return false, fmt.Errorf("order=%s: %w", o.ID, order.ErrIdempotencyMismatch)
	}
	return false, nil
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
	parts := strings.SplitN(fp, "|", 3)
	if len(parts) != 3 {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q", id, fp)
	}
	qty, err := strconv.Atoi(parts[1])
	if err != nil {
		return order.Order{}, fmt.Errorf("order=%s: malformed idempotency record %q: %w", id, fp, err)
	}
	return order.Order{ID: id, SKU: parts[0], Qty: qty, CustomerID: parts[2]}, nil
}
