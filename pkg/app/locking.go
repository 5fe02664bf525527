package app

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/keys"
	"surge/pkg/lock"
	"surge/pkg/worker"
)

// orderLocker is the worker's lock on an order: a lease of ttl kept alive
// by a watchdog, with the fencing token store.Process records. The locks
// of one SKU's orders live on the SKU's slot and are taken and released
// together (lock.Group): two script calls per batch instead of two per
// order. A busy lock
// is waited for briefly (a redelivery overtaking the first attempt), then
// reported as an error, which the worker retries through the queue's
// tiers instead of holding a handler.
type orderLocker struct {
	locks *lock.Group
}

// newOrderLocker locks orders on rdb with leases of ttl (0: 10s).
func newOrderLocker(rdb redis.Scripter, ttl time.Duration) orderLocker {
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	return orderLocker{locks: lock.NewGroup(lock.New(rdb, lock.Options{Retry: lockRetry}), lock.GroupOptions{TTL: ttl})}
}

// lockRetry is the brief wait for a busy order lock: up to 8 retries from
// 10ms doubling to 250ms (about a second in all).
var lockRetry = lock.Exponential(10*time.Millisecond, 250*time.Millisecond, 8)

// Lock takes the order's lock under its SKU's tag.
func (l orderLocker) Lock(ctx context.Context, sku, name string) (int64, context.Context, func(), error) {
	return l.locks.Hold(ctx, keys.SKUTag(sku), name)
}

var _ worker.Locker = orderLocker{}
