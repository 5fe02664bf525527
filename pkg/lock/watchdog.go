package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Watch keeps the lease alive while its holder works: it extends the lease
// every third of its TTL and returns a context derived from ctx that is
// cancelled, with cause ErrLost, as soon as the lease cannot be counted on
// any more: an extension is refused (another holder took over), or the
// lease's local validity runs out before an extension succeeds (Redis
// unreachable, or this process paused). stop ends the watchdog and cancels
// the returned context; it does not release the lease.
func (l *Lease) Watch(ctx context.Context) (held context.Context, stop func()) {
	held, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		l.watch(held, cancel, done)
	}()
	var once sync.Once
	return held, func() {
		once.Do(func() {
			close(done)
			<-exited
			cancel(context.Canceled)
		})
	}
}

type extendResult struct {
	until time.Time
	err   error
}

// watch runs one extension at a time, off the loop, so that an extension
// stuck on a dead connection cannot delay the loss deadline.
func (l *Lease) watch(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}) {
	every := l.ttl / 3
	until := l.validUntil
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	tick := time.NewTimer(every)
	defer tick.Stop()
	results := make(chan extendResult, 1)
	inFlight := false
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			cancel(fmt.Errorf("lock %s: lease ran out before it could be extended: %w", l.name, ErrLost))
			return
		case <-tick.C:
			if inFlight {
				continue
			}
			inFlight = true
			ectx, ecancel := context.WithDeadline(ctx, until)
			go func() {
				defer ecancel()
				u, err := l.extend(ectx)
				results <- extendResult{u, err}
			}()
		case r := <-results:
			inFlight = false
			switch {
			case errors.Is(r.err, ErrNotHeld):
				cancel(fmt.Errorf("lock %s: %w", l.name, ErrLost))
				return
			case r.err != nil:
				// Redis failed: try again soon, within the validity left.
				tick.Reset(every / 4)
			default:
				until = r.until
				deadline.Reset(time.Until(until))
				tick.Reset(every)
			}
		}
	}
}

// Hold acquires the lock on name with the client's retry strategy and
// watches it. It returns the fencing token, a context cancelled when the
// lease is lost, and release, which stops the watchdog and releases the
// lease (errors are ignored: a lease that cannot be released expires).
func (c *Client) Hold(ctx context.Context, name string, ttl time.Duration) (fence int64, held context.Context, release func(), err error) {
	l, err := c.Acquire(ctx, name, ttl, c.opts.Retry)
	if err != nil {
		return 0, nil, nil, err
	}
	held, stop := l.Watch(ctx)
	return l.fence, held, func() {
		stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = l.Release(rctx)
	}, nil
}

// WithLock runs fn while holding the lock on name, with the lease's
// fencing token and a context cancelled (cause ErrLost) when the lease is
// lost. It returns the acquisition's error or fn's. A lease lost while fn
// ran is reported to fn through its context only: whatever fn managed to
// write was guarded by the fencing token, not by the lock.
func (c *Client) WithLock(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context, fence int64) error) error {
	fence, held, release, err := c.Hold(ctx, name, ttl)
	if err != nil {
		return err
	}
	defer release()
	return fn(held, fence)
}
