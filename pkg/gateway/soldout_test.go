package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surge/pkg/order"
)

// newSoldOut reads sg on the fakes' clock: fakeClaims names every order
// in window 0, which time 0 falls in.
func newSoldOut(sg Sighter) *SoldOut {
	return &SoldOut{Sighter: sg, Now: func() time.Time { return time.Unix(0, 0) }}
}

// soldOutService is a service over one SKU whose last unit alice took
// (key "a"): its sold-out answers read st.
func soldOutService(t *testing.T) (*Service, *fakeStock, *fakeClaims, Accepted) {
	t.Helper()
	st, claims := newFakeStock(1), newFakeClaims()
	s := newService(st, claims, &fakeQueue{})
	s.SoldOut = newSoldOut(st)
	acc, err := s.Accept(context.Background(), buy("alice", 1), "a")
	if err != nil {
		t.Fatal(err)
	}
	return s, st, claims, acc
}

// TestSoldOutRefusesWithoutAWrite: once a reservation took the last unit,
// a new order is answered sold out from a read made for it, with no claim
// (no record, no budget spent) and no reserve script: nothing written.
func TestSoldOutRefusesWithoutAWrite(t *testing.T) {
	s, st, claims, _ := soldOutService(t)
	reserves, sights := st.reserves, st.sights
	err := s.RefuseSoldOut(context.Background(), buy("bob", 1), "b")
	if !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("order after the last unit: %v, want sold out", err)
	}
	if claims.has(order.IDFor("bob", "b", 0)) || st.reserves != reserves {
		t.Fatalf("record kept: %v, reserve scripts run: %d: want neither", claims.has(order.IDFor("bob", "b", 0)),
			st.reserves-reserves)
	}
	if st.sights != sights+1 {
		t.Fatalf("reads: %d, want one for the order", st.sights-sights)
	}
}

// TestSoldOutRetryOfAnAcceptedOrderGetsItsOwnAnswer: while the SKU is sold
// out, a retry of the accepted order's key is not answered from the read
// (its id names a reserved order): it goes the full way and gets its 202.
func TestSoldOutRetryOfAnAcceptedOrderGetsItsOwnAnswer(t *testing.T) {
	s, _, _, first := soldOutService(t)
	ctx := context.Background()
	if err := s.RefuseSoldOut(ctx, buy("alice", 1), "a"); err != nil {
		t.Fatalf("retry of the accepted order: %v, want it to go the full way", err)
	}
	acc, err := s.Accept(ctx, buy("alice", 1), "a")
	if err != nil || acc.OrderID != first.OrderID {
		t.Fatalf("retry of the accepted order: %+v %v, want 202 %s", acc, err, first.OrderID)
	}
}

// TestSoldOutKeyStaysFree: a key answered sold out is a new attempt when
// retried: sold out again while no unit is left, and a unit that comes
// back behind this gateway's back (a restock through another one) is
// taken by the next retry, as the read made for it sees the unit.
func TestSoldOutKeyStaysFree(t *testing.T) {
	s, st, _, _ := soldOutService(t)
	ctx := context.Background()
	for range 3 {
		if err := s.RefuseSoldOut(ctx, buy("bob", 1), "b"); !errors.Is(err, order.ErrSoldOut) {
			t.Fatalf("retry while sold out: %v, want sold out", err)
		}
	}
	st.restock(1)
	if err := s.RefuseSoldOut(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("retry after a restock: %v, want it to go the full way", err)
	}
	if _, err := s.Accept(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("retry after a restock: %v, want 202", err)
	}
}

// TestSoldOutRefusedByTheScriptThenRestocked: a key the reserve script
// answered sold out (its order state S) is judged anew on retry: after a
// restock the retry takes the unit.
func TestSoldOutRefusedByTheScriptThenRestocked(t *testing.T) {
	st, claims := newFakeStock(0), newFakeClaims()
	s := newService(st, claims, &fakeQueue{})
	ctx := context.Background()
	if _, err := s.Accept(ctx, buy("bob", 1), "b"); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("no stock: %v, want sold out", err)
	}
	st.restock(1)
	if _, err := s.Accept(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("retry after a restock: %v, want 202", err)
	}
}

// TestSoldOutGoesTheFullWayWhenItCannotTell: a read that fails, a SKU
// whose stock is not loaded, an order larger than what a read saw left
// but a SKU never seen short: each goes the full way.
func TestSoldOutGoesTheFullWayWhenItCannotTell(t *testing.T) {
	s, st, _, _ := soldOutService(t)
	ctx := context.Background()
	st.sightErr = errors.New("i/o timeout")
	if err := s.RefuseSoldOut(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("read failed: %v, want the full way", err)
	}
	st.sightErr = nil
	fresh := &Service{SoldOut: newSoldOut(st)}
	sights := st.sights
	if err := fresh.RefuseSoldOut(ctx, buy("bob", 1), "b"); err != nil || st.sights != sights {
		t.Fatalf("SKU never seen short: %v after %d reads, want the full way without a read", err, st.sights-sights)
	}
	var none *SoldOut
	if err := none.Refuse(ctx, buy("bob", 1), "b"); err != nil {
		t.Fatalf("no SoldOut: %v, want the full way", err)
	}
}

// slowSighter counts its reads and holds each until released.
type slowSighter struct {
	mu      sync.Mutex
	reads   int
	orders  int
	release chan struct{}
}

func (s *slowSighter) Sight(_ context.Context, _ string, ids []string) (order.Sighting, error) {
	s.mu.Lock()
	s.reads++
	s.orders += len(ids) / 4
	s.mu.Unlock()
	<-s.release
	return order.Sighting{Loaded: true, Reserved: make([]bool, len(ids))}, nil
}

// TestSoldOutOneReadPerRoundTrip: a thousand buyers at once for a sold-out
// SKU are answered by a few reads of it, not one each: while a read is in
// flight the others wait for the next, which answers up to 256 of them
// together, and every buyer is answered sold out. (synctest: the first
// read is held until every buyer waits.)
func TestSoldOutOneReadPerRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sg := &slowSighter{release: make(chan struct{})}
		so := &SoldOut{Sighter: sg}
		so.Observe("tee", 0)
		const buyers = 1000
		var wg sync.WaitGroup
		errs := make(chan error, buyers)
		for i := range buyers {
			wg.Go(func() { errs <- so.Refuse(context.Background(), buy(fmt.Sprint("c", i), 1), "k") })
		}
		synctest.Wait() // one read in flight, every other buyer queued behind it
		close(sg.release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, order.ErrSoldOut) {
				t.Fatalf("buyer answered %v, want sold out", err)
			}
		}
		if sg.orders != buyers {
			t.Fatalf("reads covered %d orders, want each of the %d once", sg.orders, buyers)
		}
		if want := 1 + (buyers-1+255)/256; sg.reads != want {
			t.Fatalf("%d reads for %d buyers, want %d (the first, then 256 per read)", sg.reads, buyers, want)
		}
	})
}
