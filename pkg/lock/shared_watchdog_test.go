package lock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/lock"
)

// 200 leases of one client, watched at once, share one watchdog: the
// process gains no goroutine per lease, every lease outlives three TTLs,
// a takeover of one cancels that one only, and once all are stopped the
// watchdog goroutine ends.
func TestSharedWatchdogKeepsManyLeases(t *testing.T) {
	rdb := testenv.Redis(t)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()
	const n = 200
	names := make([]string, n)
	leases := make([]*lock.Lease, n)
	for i := range leases {
		names[i] = lockName(t, rdb)
		l, err := c.Acquire(ctx, names[i], 600*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	before := runtime.NumGoroutine()
	helds := make([]context.Context, n)
	stops := make([]func(), n)
	for i, l := range leases {
		helds[i], stops[i] = l.Watch(ctx)
	}
	if grew := runtime.NumGoroutine() - before; grew > 3 {
		t.Errorf("watching %d leases started %d goroutines, want one watchdog (and its extensions)", n, grew)
	}
	if err := rdb.Set(ctx, keys.Lock(names[0]), "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1800 * time.Millisecond) // three TTLs
	if !errors.Is(context.Cause(helds[0]), lock.ErrLost) {
		t.Fatalf("taken-over lease: cause %v, want ErrLost", context.Cause(helds[0]))
	}
	for i := 1; i < n; i++ {
		if err := helds[i].Err(); err != nil {
			t.Fatalf("lease %d lost while watched: %v", i, context.Cause(helds[i]))
		}
	}
	var wg sync.WaitGroup
	for i := range stops {
		wg.Go(stops[i])
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if err := leases[i].Release(ctx); err != nil {
			t.Fatalf("release lease %d after three TTLs: %v", i, err)
		}
	}
	// The watchdog notices at its next wake-up (within a third of the TTL)
	// that nothing is left, and ends.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines after every lease was stopped, %d before watching", g, before)
	}
}

// Leases whose extensions hang (Redis unreachable) are each cancelled when
// their validity runs out: a stuck extension holds up no loss deadline.
func TestSharedWatchdogCancelsEveryLeaseThatCannotExtend(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	paused := newPausable(rdb)
	stuck := lock.New(paused, lock.Options{})
	l, err := stuck.Acquire(ctx, lockName(t, rdb), 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := stuck.Acquire(ctx, lockName(t, rdb), 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := l.Watch(ctx)
	defer stop()
	paused.Pause()
	otherHeld, otherStop := other.Watch(ctx)
	defer otherStop()
	for _, h := range []context.Context{held, otherHeld} {
		select {
		case <-h.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("lease never counted as lost while Redis hung")
		}
	}
	if !errors.Is(context.Cause(held), lock.ErrLost) || !errors.Is(context.Cause(otherHeld), lock.ErrLost) {
		t.Fatalf("causes %v and %v, want both ErrLost (neither could extend)", context.Cause(held), context.Cause(otherHeld))
	}
	paused.Resume()
}
