package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

func setup(t *testing.T, total int) (*stock.Stock, string) {
	t.Helper()
	rdb := testenv.Redis(t)
	sku := testenv.Unique("stk-")
	testenv.CleanupSKU(t, rdb, sku)
	s := stock.New(rdb, stock.Options{})
	if err := stock.LoadScripts(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	if total >= 0 {
		if _, err := s.SetStock(context.Background(), sku, total, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s, sku
}

func mustView(t *testing.T, s *stock.Stock, sku string) stock.View {
	t.Helper()
	v, err := s.View(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Consistent() {
		t.Fatalf("avail %d + reserved %d + sold %d != stock %d", v.Avail, v.Reserved, v.Sold, v.Stock)
	}
	return v
}

func ord(sku string, n, qty int) order.Order {
	return order.Order{ID: order.IDFor("c", fmt.Sprint(sku, n), 0), SKU: sku, Qty: qty, CustomerID: "c"}
}

func TestReserveCommitRelease(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 5)
	a, b := ord(sku, 1, 2), ord(sku, 2, 3)
	if r, err := s.Reserve(ctx, a); err != nil || r.Repeat || r.Avail != 3 {
		t.Fatalf("reserve a: %+v %v", r, err)
	}
	if r, err := s.Reserve(ctx, a); err != nil || !r.Repeat {
		t.Fatalf("repeat reserve a: %+v %v, want repeat", r, err)
	}
	if _, err := s.Reserve(ctx, b); err != nil {
		t.Fatalf("reserve b: %v", err)
	}
	if _, err := s.Reserve(ctx, ord(sku, 3, 1)); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("reserve c: %v, want sold out", err)
	}
	v := mustView(t, s, sku)
	if v.Avail != 0 || v.Reserved != 5 || len(v.Reservations) != 2 {
		t.Fatalf("after reserves: %+v", v)
	}
	if out, err := s.Commit(ctx, sku, a.ID, a.Qty); err != nil || out != order.CommittedFromResv {
		t.Fatalf("commit a: %v %v", out, err)
	}
	if out, err := s.Commit(ctx, sku, a.ID, a.Qty); err != nil || out != order.CommittedAlready {
		t.Fatalf("second commit a: %v %v", out, err)
	}
	if n, err := s.Release(ctx, sku, a.ID, order.ReleaseRejected); !errors.Is(err, order.ErrCommitted) || n != 0 {
		t.Fatalf("release committed a: %d %v", n, err)
	}
	if n, err := s.Release(ctx, sku, b.ID, order.ReleaseRejected); err != nil || n != 3 {
		t.Fatalf("release b: %d %v", n, err)
	}
	if n, err := s.Release(ctx, sku, b.ID, order.ReleaseRejected); err != nil || n != 0 {
		t.Fatalf("second release b: %d %v", n, err)
	}
	if r, err := s.Reserve(ctx, b); err != nil || !r.Repeat {
		t.Fatalf("reserve rejected b again: %+v %v, want repeat with no change", r, err)
	}
	v = mustView(t, s, sku)
	if v.Avail != 3 || v.Sold != 2 || v.Reserved != 0 {
		t.Fatalf("final: %+v", v)
	}
}

func TestUndoAllowsNewReservation(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 1)
	o := ord(sku, 1, 1)
	r, err := s.Reserve(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Undo(ctx, sku, o.ID, r.Nonce); err != nil || n != 1 {
		t.Fatalf("undo: %d %v", n, err)
	}
	if n, err := s.Undo(ctx, sku, o.ID, r.Nonce); err != nil || n != 0 {
		t.Fatalf("undo sent again: %d %v, want nothing more to undo", n, err)
	}
	// A retry that claimed before the undoing request forgot its record
	// must not take the order answered not taken.
	if _, err := s.ReserveRetry(ctx, o); !errors.Is(err, order.ErrUndone) {
		t.Fatalf("retry after undo: %v, want ErrUndone", err)
	}
	if st, _ := s.State(ctx, sku, o.ID); st != "U" {
		t.Fatalf("state %q, want U", st)
	}
	// A new claim after the record was forgotten reserves as usual.
	if r, err := s.Reserve(ctx, o); err != nil || r.Repeat {
		t.Fatalf("reserve after undo: %+v %v, want a fresh reservation", r, err)
	}
	mustView(t, s, sku)
}

// TestUndoOnlyOwnUnpublishedReservation: the gateway takes back a
// reservation only when it is its own request's and no other request for
// the order ran the reserve script since (which may have published it).
func TestUndoOnlyOwnUnpublishedReservation(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 5)
	a := ord(sku, 1, 2)
	first, err := s.Reserve(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Undo(ctx, sku, a.ID, "deadbeef"); !errors.Is(err, order.ErrNotYours) {
		t.Fatalf("undo with another request's nonce: %v, want ErrNotYours", err)
	}
	if r, err := s.Reserve(ctx, a); err != nil || !r.Repeat {
		t.Fatalf("repeat: %+v %v", r, err)
	}
	if st, _ := s.State(ctx, sku, a.ID); st != "P" {
		t.Fatalf("state after a repeat: %q, want P", st)
	}
	if _, err := s.Undo(ctx, sku, a.ID, first.Nonce); !errors.Is(err, order.ErrNotYours) {
		t.Fatalf("undo after a repeat: %v, want ErrNotYours (the repeat may have published it)", err)
	}
	if v := mustView(t, s, sku); v.Reserved != 2 || v.Avail != 3 {
		t.Fatalf("a refused undo changed stock: %+v", v)
	}
	// Nothing reserved by the order: nothing to undo, and not an error.
	none := ord(sku, 2, 1)
	if n, err := s.Undo(ctx, sku, none.ID, "00000000"); err != nil || n != 0 {
		t.Fatalf("undo of an order never reserved: %d %v", n, err)
	}
	big := ord(sku, 3, 9)
	if _, err := s.Reserve(ctx, big); !errors.Is(err, order.ErrSoldOut) {
		t.Fatal(err)
	}
	if n, err := s.Undo(ctx, sku, big.ID, "00000000"); err != nil || n != 0 {
		t.Fatalf("undo of an order answered sold out: %d %v", n, err)
	}
	if _, err := s.Reserve(ctx, big); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("retry of the sold-out order: %v, want sold out again", err)
	}
	if _, err := s.Commit(ctx, sku, a.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Undo(ctx, sku, a.ID, first.Nonce); !errors.Is(err, order.ErrCommitted) {
		t.Fatalf("undo of a committed order: %v, want ErrCommitted", err)
	}
}

// TestReservationTimeIsRedisClock: the time a reservation records is the
// master's, so the reconciler's grace does not depend on which gateway
// (and whose clock) reserved.
func TestReservationTimeIsRedisClock(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 3)
	o := ord(sku, 1, 1)
	if _, err := s.Reserve(ctx, o); err != nil {
		t.Fatal(err)
	}
	master, err := testenv.Redis(t).MasterForKey(ctx, keys.Avail(sku))
	if err != nil {
		t.Fatal(err)
	}
	now, err := master.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	h := mustView(t, s, sku).Reservations[o.ID]
	if d := now.Sub(h.ReservedAt); d < 0 || d > 5*time.Second {
		t.Fatalf("reserved at %v, master's clock %v", h.ReservedAt, now)
	}
	if h.CustomerID != o.CustomerID || h.Qty != 1 || h.Nonce == "" {
		t.Fatalf("reservation %+v: want qty, customer and nonce recorded", h)
	}
}

func TestCommitWithoutReservationTakesFromAvail(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 4)
	out, err := s.Commit(ctx, sku, ord(sku, 9, 3).ID, 3)
	if err != nil || out != order.CommittedFromAvail {
		t.Fatalf("commit without reservation: %v %v", out, err)
	}
	v := mustView(t, s, sku)
	if v.Avail != 1 || v.Sold != 3 {
		t.Fatalf("view: %+v", v)
	}
}

func TestNotLoaded(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, -1)
	if _, err := s.Reserve(ctx, ord(sku, 1, 1)); !errors.Is(err, order.ErrNotLoaded) {
		t.Fatalf("reserve: %v, want not loaded", err)
	}
	if _, err := s.Commit(ctx, sku, ord(sku, 1, 1).ID, 1); !errors.Is(err, order.ErrNotLoaded) {
		t.Fatalf("commit: %v, want not loaded", err)
	}
	v, err := s.View(ctx, sku)
	if err != nil || v.Loaded {
		t.Fatalf("view: %+v %v, want not loaded", v, err)
	}
}

func TestSetStockKeepsSoldAndReservations(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 10)
	reserveTwoCommitFirst(t, s, sku)
	v, err := s.SetStock(ctx, sku, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Stock != 20 || v.Sold != 2 || v.Reserved != 3 || v.Avail != 15 || !v.Consistent() {
		t.Fatalf("after reload: %+v", v)
	}
}

// TestConcurrentReserveLastUnits races 1000 buyers for 100 units: exactly
// 100 win and the counters stay consistent.
func TestConcurrentReserveLastUnits(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 100)
	var won, lost atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Reserve(ctx, ord(sku, i, 1))
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, order.ErrSoldOut):
				lost.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if won.Load() != 100 || lost.Load() != 900 {
		t.Fatalf("won %d lost %d, want 100 and 900", won.Load(), lost.Load())
	}
	v := mustView(t, s, sku)
	if v.Avail != 0 || v.Reserved != 100 {
		t.Fatalf("view: avail %d reserved %d", v.Avail, v.Reserved)
	}
}

// TestSubSecondStateTTL: a state TTL under a second must not make the
// reserve script fail after it moved the units (Redis refuses EX 0).
func TestSubSecondStateTTL(t *testing.T) {
	ctx := context.Background()
	_, sku := setup(t, 3)
	s := stock.New(testenv.Redis(t), stock.Options{StateTTL: 500 * time.Millisecond})
	if _, err := s.Reserve(ctx, ord(sku, 1, 1)); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	if ttl, err := testenv.Redis(t).TTL(ctx, keys.OrderState(sku, ord(sku, 1, 1).ID)).Result(); err != nil || ttl < time.Second {
		t.Fatalf("state ttl %v %v: want whole seconds, rounded up", ttl, err)
	}
	if v := mustView(t, s, sku); v.Avail != 2 || v.Reserved != 1 {
		t.Fatalf("view %+v, want one unit reserved", v)
	}
}

// reserveTwoCommitFirst reserves two orders of sku (2 and 3 units) and
// commits the first: 2 sold, 3 reserved.
func reserveTwoCommitFirst(t *testing.T, s *stock.Stock, sku string) (a, b order.Order) {
	t.Helper()
	ctx := context.Background()
	a, b = ord(sku, 1, 2), ord(sku, 2, 3)
	for _, o := range []order.Order{a, b} {
		if _, err := s.Reserve(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, sku, a.ID, a.Qty); err != nil {
		t.Fatal(err)
	}
	return a, b
}
