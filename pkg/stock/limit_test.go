package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// limited loads total units of a fresh SKU with a purchase limit of max.
func limited(t *testing.T, total, max int) (*stock.Stock, string) {
	t.Helper()
	s, sku := setup(t, -1)
	if _, err := s.SetStockLimit(context.Background(), sku, total, 0, &max); err != nil {
		t.Fatal(err)
	}
	return s, sku
}

func custOrder(sku, customer string, n, qty int) order.Order {
	return order.Order{ID: order.IDFor(customer, fmt.Sprint(sku, n), 0), SKU: sku, Qty: qty, CustomerID: customer}
}

// units reads the customer's count of sku (0 when the key is missing).
func units(t *testing.T, sku, customer string) int {
	t.Helper()
	n, err := testenv.Redis(t).Get(context.Background(), keys.CustomerUnits(sku, customer)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

func TestPurchaseLimitRefusesPastTheLimit(t *testing.T) {
	ctx := context.Background()
	s, sku := limited(t, 10, 3)
	if v := mustView(t, s, sku); v.MaxPerCustomer != 3 {
		t.Fatalf("view max_per_customer = %d, want 3", v.MaxPerCustomer)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 1, 2)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(ctx, custOrder(sku, "ann", 2, 2))
	if !errors.Is(err, order.ErrPurchaseLimit) || errors.Is(err, order.ErrSoldOut) || r.Repeat || r.Avail != 8 {
		t.Fatalf("second order past the limit: %+v %v, want purchase limit with avail 8", r, err)
	}
	// The same order again (a retry) is refused again, as a repeat.
	if r, err := s.ReserveRetry(ctx, custOrder(sku, "ann", 2, 2)); !errors.Is(err, order.ErrPurchaseLimit) || !r.Repeat {
		t.Fatalf("retry of the refused order: %+v %v, want purchase limit repeat", r, err)
	}
	// Another order that fits, and another customer, are unaffected.
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 3, 1)); err != nil {
		t.Fatalf("order up to the limit: %v", err)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "bob", 1, 3)); err != nil {
		t.Fatalf("another customer: %v", err)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "cat", 1, 4)); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("an order bigger than the limit: %v", err)
	}
	if got := units(t, sku, "ann"); got != 3 {
		t.Fatalf("ann's units = %d, want 3", got)
	}
	if v := mustView(t, s, sku); v.Reserved != 6 {
		t.Fatalf("reserved = %d, want 6", v.Reserved)
	}
}

func TestPurchaseLimitRetryCountsOnce(t *testing.T) {
	ctx := context.Background()
	s, sku := limited(t, 10, 2)
	o := custOrder(sku, "ann", 1, 1)
	for i := range 5 {
		if _, err := s.ReserveRetry(ctx, o); err != nil && i > 0 {
			t.Fatalf("retry %d: %v", i, err)
		} else if i == 0 {
			if _, err := s.Reserve(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := units(t, sku, "ann"); got != 1 {
		t.Fatalf("units after 5 retries of one order = %d, want 1", got)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 2, 1)); err != nil {
		t.Fatalf("a second unit within the limit: %v", err)
	}
}

func TestPurchaseLimitGivesBackReleasedAndUndoneUnits(t *testing.T) {
	ctx := context.Background()
	s, sku := limited(t, 10, 2)
	a, b := custOrder(sku, "ann", 1, 1), custOrder(sku, "ann", 2, 1)
	ra, err := s.Reserve(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 3, 1)); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("third unit: %v, want purchase limit", err)
	}
	if n, err := s.Undo(ctx, sku, a.ID, ra.Nonce); err != nil || n != 1 {
		t.Fatalf("undo a: %d %v", n, err)
	}
	if n, err := s.Release(ctx, sku, b.ID, order.ReleaseRejected); err != nil || n != 1 {
		t.Fatalf("release b: %d %v", n, err)
	}
	if got := units(t, sku, "ann"); got != 0 {
		t.Fatalf("units after undo and release = %d, want 0", got)
	}
	// Released again: nothing more is given back.
	if _, err := s.Release(ctx, sku, b.ID, order.ReleaseRejected); err != nil {
		t.Fatal(err)
	}
	c, d := custOrder(sku, "ann", 4, 1), custOrder(sku, "ann", 5, 1)
	for _, o := range []order.Order{c, d} {
		if _, err := s.Reserve(ctx, o); err != nil {
			t.Fatalf("reserve after units came back: %v", err)
		}
	}
	// A commit keeps the units counted.
	if _, err := s.Commit(ctx, sku, c.ID, 1); err != nil {
		t.Fatal(err)
	}
	if got := units(t, sku, "ann"); got != 2 {
		t.Fatalf("units after commit = %d, want 2", got)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 6, 1)); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("past the limit after a commit: %v", err)
	}
}

func TestPurchaseLimitChangedMidSale(t *testing.T) {
	ctx := context.Background()
	s, sku := limited(t, 10, 1)
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 1, 1)); err != nil {
		t.Fatal(err)
	}
	refused := custOrder(sku, "ann", 2, 1)
	if _, err := s.Reserve(ctx, refused); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("past limit 1: %v", err)
	}
	three := 3
	if _, err := s.SetStockLimit(ctx, sku, 10, 0, &three); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 3, 2)); err != nil {
		t.Fatalf("within the raised limit: %v", err)
	}
	// The order refused before keeps its answer.
	if _, err := s.ReserveRetry(ctx, refused); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("retry of an order refused under the old limit: %v", err)
	}
	// A load without a limit keeps it; 0 clears it.
	v, err := s.SetStock(ctx, sku, 12, 0)
	if err != nil || v.MaxPerCustomer != 3 {
		t.Fatalf("restock without a limit: max %d %v, want 3 kept", v.MaxPerCustomer, err)
	}
	zero := 0
	if v, err = s.SetStockLimit(ctx, sku, 12, 0, &zero); err != nil || v.MaxPerCustomer != 0 {
		t.Fatalf("clear the limit: max %d %v", v.MaxPerCustomer, err)
	}
	if _, err := s.Reserve(ctx, custOrder(sku, "ann", 4, 5)); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	if v := mustView(t, s, sku); v.Reservations[custOrder(sku, "ann", 4, 5).ID].Counted {
		t.Fatal("a reservation made without a limit is marked counted")
	}
}

func TestNoLimitKeepsNoCount(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 10)
	o := custOrder(sku, "ann", 1, 4)
	if _, err := s.Reserve(ctx, o); err != nil {
		t.Fatal(err)
	}
	n, err := testenv.Redis(t).Exists(ctx, keys.CustomerUnits(sku, "ann")).Result()
	if err != nil || n != 0 {
		t.Fatalf("count key exists=%d %v without a limit", n, err)
	}
	if _, err := s.Release(ctx, sku, o.ID, order.ReleaseRejected); err != nil {
		t.Fatal(err)
	}
}

// One customer, many distinct orders at once: never more than the limit
// reserved, the rest refused for the limit (not sold out).
func TestPurchaseLimitConcurrentOrders(t *testing.T) {
	ctx := context.Background()
	const limit, tries = 3, 64
	s, sku := limited(t, 100, limit)
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			_, err := s.Reserve(ctx, custOrder(sku, "bot", i, 1))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, order.ErrPurchaseLimit):
				refused.Add(1)
			default:
				t.Errorf("order %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != tries-limit {
		t.Fatalf("reserved %d refused %d, want %d and %d", ok.Load(), refused.Load(), limit, tries-limit)
	}
	if v := mustView(t, s, sku); v.Reserved != limit || v.Avail != 100-limit {
		t.Fatalf("view %+v", v)
	}
}

// BenchmarkReserveLimited is BenchmarkReserve's wait=0 on a SKU with a
// purchase limit (one customer, a limit no order reaches): what counting
// costs a reservation.
func BenchmarkReserveLimited(b *testing.B) {
	s, sku := waitStock(b, 0, order.MaxStock)
	limit := order.MaxStock
	if _, err := s.SetStockLimit(context.Background(), sku, order.MaxStock, 0, &limit); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Reserve(context.Background(), ord(sku, int(seq.Add(1)), 1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestReserveReportsTheLimitItApplied: every reservation reports, and
// records, the purchase limit it was made under (0: none), so that the
// order carries it to MySQL; a repeat reports the one its reservation
// records, whatever the limit is now; a release gives back the units of a
// reservation recorded in either form (":L<N>", or ":L" written before the
// limit was recorded).
func TestReserveReportsTheLimitItApplied(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 10)
	limitOf := func(r order.Reservation) string {
		if r.MaxPerCustomer == nil {
			return "unknown"
		}
		return fmt.Sprint(*r.MaxPerCustomer)
	}
	free := custOrder(sku, "ann", 1, 1)
	if r, err := s.Reserve(ctx, free); err != nil || limitOf(r) != "0" {
		t.Fatalf("no limit: %s %v, want 0", limitOf(r), err)
	}
	five, two := 5, 2
	if _, err := s.SetStockLimit(ctx, sku, 10, 0, &five); err != nil {
		t.Fatal(err)
	}
	under5 := custOrder(sku, "ann", 2, 1)
	if r, err := s.Reserve(ctx, under5); err != nil || limitOf(r) != "5" {
		t.Fatalf("limit 5: %s %v, want 5", limitOf(r), err)
	}
	if h := mustView(t, s, sku).Reservations[under5.ID]; !h.Counted || h.MaxPerCustomer == nil || *h.MaxPerCustomer != 5 {
		t.Fatalf("reservation under limit 5: %+v", h)
	}
	if _, err := s.SetStockLimit(ctx, sku, 10, 0, &two); err != nil {
		t.Fatal(err)
	}
	for _, o := range []order.Order{free, under5} {
		r, err := s.ReserveRetry(ctx, o)
		if want := map[string]string{free.ID: "0", under5.ID: "5"}[o.ID]; err != nil || !r.Repeat || limitOf(r) != want {
			t.Fatalf("repeat of %s after the limit became 2: %+v %s %v, want a repeat reporting %s", o.ID, r, limitOf(r), err, want)
		}
	}
	under2 := custOrder(sku, "bob", 1, 2)
	if r, err := s.Reserve(ctx, under2); err != nil || limitOf(r) != "2" {
		t.Fatalf("limit 2: %s %v, want 2", limitOf(r), err)
	}
	// A reservation written before the limit was recorded: counted, its
	// limit unknown.
	old := custOrder(sku, "cat", 1, 1)
	rdb := testenv.Redis(t)
	if err := rdb.HSet(ctx, keys.Resv(sku), old.ID, "1:1700000000000:abcd1234:cat:L").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.DecrBy(ctx, keys.Avail(sku), 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keys.OrderState(sku, old.ID), "A", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keys.CustomerUnits(sku, "cat"), 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.ReserveRetry(ctx, old); err != nil || !r.Repeat || r.MaxPerCustomer != nil {
		t.Fatalf("repeat of a reservation recorded as \":L\": %+v %v, want a repeat with no limit known", r, err)
	}
	if h := mustView(t, s, sku).Reservations[old.ID]; !h.Counted || h.MaxPerCustomer != nil {
		t.Fatalf("reservation recorded as \":L\": %+v", h)
	}
	for _, o := range []order.Order{under5, under2, old} {
		if n, err := s.Release(ctx, sku, o.ID, order.ReleaseRejected); err != nil || n != o.Qty {
			t.Fatalf("release %s: %d %v", o.ID, n, err)
		}
	}
	for _, c := range []string{"ann", "bob", "cat"} {
		if got := units(t, sku, c); got != 0 {
			t.Fatalf("%s's units after the releases = %d, want 0", c, got)
		}
	}
}

func TestParseHeldLimit(t *testing.T) {
	for val, want := range map[string]string{
		"2:1700000000000:n:ann":     "counted=false limit=0",
		"2:1700000000000:n:ann:L5":  "counted=true limit=5",
		"2:1700000000000:n:ann:L":   "counted=true limit=unknown",
		"2:1700000000000":           "counted=false limit=0",
		"2:1700000000000:n:L5":      "counted=false limit=0",
		"2:1700000000000:n:ann:L0":  "error",
		"2:1700000000000:n:ann:Lx":  "error",
		"2:1700000000000:n:ann:L-1": "error",
	} {
		h, err := stock.ParseHeld(val)
		got := "error"
		if err == nil {
			limit := "unknown"
			if h.MaxPerCustomer != nil {
				limit = fmt.Sprint(*h.MaxPerCustomer)
			}
			got = fmt.Sprintf("counted=%t limit=%s", h.Counted, limit)
		}
		if got != want {
			t.Errorf("ParseHeld(%q) = %s (%v), want %s", val, got, err, want)
		}
	}
}
