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
// unreachable, or this process paused). stop ends the watching and cancels
// the returned context; it does not release the lease.
//
// All the leases of one Client share one watchdog goroutine, which runs
// only while some lease is watched: watching a lease costs a map entry,
// not a goroutine and timers, and a holder done before a third of its TTL
// (most orders) never causes an extension.
func (l *Lease) Watch(ctx context.Context) (held context.Context, stop func()) {
	held, cancel := context.WithCancelCause(ctx)
	w := &watched{l: l, held: held, cancel: cancel, every: l.ttl / 3, until: l.validUntil}
	w.nextExtend = time.Now().Add(w.every)
	l.c.dog.add(w)
	var once sync.Once
	return held, func() {
		once.Do(func() {
			l.c.dog.remove(w)
			cancel(context.Canceled)
		})
	}
}

// watched is one lease under watch. Its times and inFlight belong to the
// watchdog's mutex.
type watched struct {
	l      *Lease
	held   context.Context
	cancel context.CancelCauseFunc
	every  time.Duration
	// until is the lease's local validity; nextExtend when to extend it.
	until, nextExtend time.Time
	// inFlight is set while an extension runs: one at a time per lease.
	inFlight bool
}

// next is the watched lease's next event: its extension, or its loss
// deadline while an extension is running.
func (w *watched) next() time.Time {
	if w.inFlight || w.until.Before(w.nextExtend) {
		return w.until
	}
	return w.nextExtend
}

// watchdog extends a client's watched leases and cancels the lost ones,
// from one goroutine that sleeps until the earliest event due.
type watchdog struct {
	mu      sync.Mutex
	leases  map[*watched]struct{}
	running bool
	// due is the time the loop's timer is set for (zero: not set).
	due  time.Time
	wake chan struct{}
}

func newWatchdog() *watchdog {
	return &watchdog{leases: map[*watched]struct{}{}, wake: make(chan struct{}, 1)}
}

func (d *watchdog) add(w *watched) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.leases[w] = struct{}{}
	if !d.running {
		d.running = true
		d.due = time.Time{}
		go d.loop()
	}
	d.wakeFor(w.next())
}

// wakeFor makes the loop wake by t; the caller holds mu.
func (d *watchdog) wakeFor(t time.Time) {
	if d.due.IsZero() || t.Before(d.due) {
		d.due = t
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

func (d *watchdog) remove(w *watched) {
	d.mu.Lock()
	delete(d.leases, w)
	d.mu.Unlock()
}

// loop sleeps until the earliest event and sweeps; it exits once no lease
// is watched (add starts it again).
func (d *watchdog) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		wait := time.Until(d.due)
		if d.due.IsZero() {
			wait = time.Hour
		}
		d.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-d.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		case <-timer.C:
		}
		if !d.sweep() {
			return
		}
	}
}

// sweep cancels the leases past their validity, starts the extensions
// due, and sets the next wake-up. It reports false, with the loop marked
// stopped, when no lease is left.
func (d *watchdog) sweep() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	d.due = time.Time{}
	for w := range d.leases {
		switch {
		case w.held.Err() != nil:
			// The holder's own context ended: nothing left to guard.
			delete(d.leases, w)
			continue
		case !now.Before(w.until):
			w.cancel(fmt.Errorf("lock %s: lease ran out before it could be extended: %w", w.l.name, ErrLost))
			delete(d.leases, w)
			continue
		case !w.inFlight && !now.Before(w.nextExtend):
			w.inFlight = true
			go d.extend(w, w.until)
		}
		if t := w.next(); d.due.IsZero() || t.Before(d.due) {
			d.due = t
		}
	}
	if len(d.leases) == 0 {
		d.running = false
		return false
	}
	return true
}

// extend runs one extension of w, off the loop so that an extension stuck
// on a dead connection cannot delay any lease's loss deadline.
func (d *watchdog) extend(w *watched, until time.Time) {
	ctx, cancel := context.WithDeadline(w.held, until)
	defer cancel()
	u, err := w.l.extend(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	w.inFlight = false
	if _, ok := d.leases[w]; !ok {
		return
	}
	switch {
	case errors.Is(err, ErrNotHeld):
		w.cancel(fmt.Errorf("lock %s: %w", w.l.name, ErrLost))
		delete(d.leases, w)
		return
	case err != nil:
		// Redis failed: try again soon, within the validity left.
		w.nextExtend = time.Now().Add(w.every / 4)
	default:
		w.until = u
		w.nextExtend = time.Now().Add(w.every)
	}
	d.wakeFor(w.next())
}

// Hold acquires the lock on name with the client's retry strategy and
// watches it. It returns the fencing token, a context cancelled when the
// lease is lost, and release, which stops the watching and releases the
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
