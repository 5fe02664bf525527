package lock

import (
	"context"
	"fmt"
	"time"

	"surge/lua"
)

// Lease is one holding of a lock. Its methods are safe for concurrent
// use, but a lease is meant to have one owner (plus its watchdog).
type Lease struct {
	c     *Client
	name  string
	key   string
	token string
	ttl   time.Duration
	fence int64
	// validUntil is when the lease must be counted as gone unless
	// extended; written once by try, before the lease is returned.
	validUntil time.Time
}

// Name is the locked name.
func (l *Lease) Name() string { return l.name }

// Fence is the lease's fencing token: larger than every token issued
// before for the same name. Writes guarded by the lock must carry it.
func (l *Lease) Fence() int64 { return l.fence }

// Token is the random holder token stored in the lease key.
func (l *Lease) Token() string { return l.token }

// TTL is the lease duration, renewed by each Extend.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Extend resets the lease's TTL to its full length. It returns ErrNotHeld
// when the lease is no longer the caller's.
func (l *Lease) Extend(ctx context.Context) error {
	_, err := l.extend(ctx)
	return err
}

func (l *Lease) extend(ctx context.Context) (time.Time, error) {
	start := time.Now()
	n, err := lua.LeaseExtend.Run(ctx, l.c.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("extend lock %s: %w", l.name, err)
	}
	if n != 1 {
		return time.Time{}, fmt.Errorf("extend lock %s: %w", l.name, ErrNotHeld)
	}
	return validity(start, l.ttl), nil
}

// Release gives the lock up. It returns ErrNotHeld when the lease was no
// longer the caller's (nothing is deleted then).
func (l *Lease) Release(ctx context.Context) error {
	n, err := lua.LeaseRelease.Run(ctx, l.c.rdb, []string{l.key}, l.token).Int64()
	if err != nil {
		return fmt.Errorf("release lock %s: %w", l.name, err)
	}
	if n != 1 {
		return fmt.Errorf("release lock %s: %w", l.name, ErrNotHeld)
	}
	return nil
}
