package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
	"surge/pkg/lock"
	"surge/pkg/order"
)

// A holder frozen past its TTL (its watchdog frozen with it) loses the
// lock: its context is cancelled with ErrLost, a new holder gets a larger
// fencing token and writes the order, and the old holder's late write,
// sent as if it had checked its context just before freezing, is refused
// by MySQL's fencing check while the new holder's write stands.
func TestPausedHolderIsFencedOut(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	db, dsn := testkit.Store(t)
	sku := testenv.Unique("fence-")
	name, price := "Fenced item", int64(500)
	if _, err := db.SetStock(ctx, sku, 10, &name, &price); err != nil {
		t.Fatal(err)
	}
	o := order.Order{ID: testenv.Unique("ord-"), SKU: sku, Qty: 2, CustomerID: "c-fence"}
	lockName := lockName(t, rdb)

	frozen := newPausable(rdb)
	oldC := lock.New(frozen, lock.Options{})
	newC := lock.New(rdb, lock.Options{})
	ttl := 300 * time.Millisecond

	oldLease, err := oldC.Acquire(ctx, lockName, ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := oldLease.Watch(ctx)
	defer stop()
	frozen.Pause()

	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case <-held.Done():
	case <-waitCtx.Done():
		t.Fatal("the frozen holder's context was never cancelled")
	}
	if !errors.Is(context.Cause(held), lock.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(held))
	}

	newLease, err := newC.Acquire(waitCtx, lockName, 10*time.Second, lock.Linear(20*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer newLease.Release(ctx)
	if newLease.Fence() <= oldLease.Fence() {
		t.Fatalf("new fence %d is not above the old %d", newLease.Fence(), oldLease.Fence())
	}
	res, err := db.Process(ctx, o, newLease.Fence())
	if err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("new holder's write: %+v, %v", res, err)
	}

	frozen.Resume()
	_, err = db.Process(ctx, o, oldLease.Fence())
	if !errors.Is(err, order.ErrStaleFence) {
		t.Fatalf("late write with the old fence: %v, want ErrStaleFence", err)
	}
	if err := oldLease.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("old holder's release: %v, want ErrNotHeld", err)
	}

	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var orderFence, recorded, invoices int64
	err = raw.QueryRowContext(ctx, `SELECT o.fence, f.fence, (SELECT COUNT(*) FROM invoices i WHERE i.order_id = o.order_id)
		FROM orders o JOIN order_fences f ON f.order_id = o.order_id WHERE o.order_id = ?`, o.ID).Scan(&orderFence, &recorded, &invoices)
	if err != nil {
		t.Fatal(err)
	}
	if orderFence != newLease.Fence() || recorded != newLease.Fence() || invoices != 1 {
		t.Fatalf("order fence %d, recorded fence %d, invoices %d; want %d, %d, 1",
			orderFence, recorded, invoices, newLease.Fence(), newLease.Fence())
	}
}

// The watchdog keeps a lease alive well past its TTL while the holder
// works, and stopping it leaves the lease to Release.
func TestWatchdogExtendsLease(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()
	l, err := c.Acquire(ctx, name, 500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := l.Watch(ctx)
	time.Sleep(1500 * time.Millisecond) // the holder's work: three TTLs
	if err := held.Err(); err != nil {
		t.Fatalf("lease lost while the watchdog ran: %v", context.Cause(held))
	}
	stop()
	if !errors.Is(held.Err(), context.Canceled) || errors.Is(context.Cause(held), lock.ErrLost) {
		t.Fatalf("after stop: err %v cause %v, want Canceled without ErrLost", held.Err(), context.Cause(held))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after three TTLs: %v", err)
	}
}

// A lease taken over by another holder cancels the watched context at the
// next extension.
func TestWatchdogNoticesTakeover(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()
	l, err := c.Acquire(ctx, name, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := l.Watch(ctx)
	defer stop()
	if err := rdb.Set(ctx, keys.Lock(name), "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	waitLost(t, held)
}

// WithLock runs fn with the fence under the lock and releases it after.
func TestWithLock(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{Retry: lock.NoRetry()})
	ctx := context.Background()
	boom := errors.New("boom")
	var fence int64
	err := c.WithLock(ctx, name, time.Second, func(ctx context.Context, f int64) error {
		fence = f
		if _, err := c.Acquire(ctx, name, time.Second, nil); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("acquire inside WithLock: %v, want ErrNotObtained", err)
		}
		return boom
	})
	if !errors.Is(err, boom) || fence <= 0 {
		t.Fatalf("WithLock returned %v with fence %d, want fn's error and a fence", err, fence)
	}
	if err := c.WithLock(ctx, name, time.Second, func(context.Context, int64) error { return nil }); err != nil {
		t.Fatalf("lock not released after WithLock: %v", err)
	}
}
