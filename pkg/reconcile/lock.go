package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/lock"
)

// ErrBusy means another run holds the SKU's lock.
var ErrBusy = errors.New("sku is being reconciled by another run")

// Locker serialises runs on one SKU. Lock returns a release func, or an
// error wrapping ErrBusy when another run holds the SKU. The lock only
// saves duplicate work: every repair is conditional on what it read, so
// two overlapping runs (a lease that expired) still cannot corrupt a SKU.
type Locker interface {
	Lock(ctx context.Context, sku string) (release func(), err error)
}

// LockOptions tunes a RedisLocker. The zero value means the defaults.
type LockOptions struct {
	// TTL bounds how long a crashed run keeps a SKU locked. Default 1m.
	TTL time.Duration
	// Wait is how long Lock waits for a busy SKU. Default 2s.
	Wait time.Duration
}

// RedisLocker is a Locker on pkg/lock's lease "reconcile:<sku>" (SET NX
// PX, released only by its token), the lock the worker uses for orders.
type RedisLocker struct {
	c    *lock.Client
	opts LockOptions
}

var _ Locker = (*RedisLocker)(nil)

// NewRedisLocker returns a RedisLocker on rdb.
func NewRedisLocker(rdb redis.Scripter, opts LockOptions) *RedisLocker {
	if opts.TTL <= 0 {
		opts.TTL = time.Minute
	}
	if opts.Wait <= 0 {
		opts.Wait = 2 * time.Second
	}
	return &RedisLocker{c: lock.New(rdb, lock.Options{}), opts: opts}
}

// Lock takes sku's lease, waiting up to LockOptions.Wait while another run
// holds it.
func (l *RedisLocker) Lock(ctx context.Context, sku string) (func(), error) {
	wctx, cancel := context.WithTimeout(ctx, l.opts.Wait)
	defer cancel()
	lease, err := l.c.Acquire(wctx, "reconcile:"+sku, l.opts.TTL, lock.Linear(50*time.Millisecond, 0))
	switch {
	case errors.Is(err, lock.ErrNotObtained),
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, fmt.Errorf("lock sku=%s: %w", sku, ErrBusy)
	case err != nil:
		return nil, fmt.Errorf("lock sku=%s: %w", sku, err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = lease.Release(rctx) // an expired lease is gone already
	}, nil
}
