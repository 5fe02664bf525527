package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"surge/pkg/order"
)

// seedLimited creates a product with stock units and a purchase limit.
func seedLimited(t *testing.T, s *Store, sku string, stock, limit int) {
	t.Helper()
	if _, err := s.SetStockWith(context.Background(), sku, stock, nil, nil, &limit, nil); err != nil {
		t.Fatalf("SetStockWith %s: %v", sku, err)
	}
}

func custOrd(id, sku, customer string, qty int) order.Order {
	return order.Order{ID: id, SKU: sku, Qty: qty, CustomerID: customer}
}

func TestSetStockKeepsOrClearsTheLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seedLimited(t, s, "mug", 10, 2)
	p, err := s.SetStock(ctx, "mug", 12, nil, nil)
	if err != nil || p.MaxPerCustomer != 2 {
		t.Fatalf("restock without a limit: %+v %v, want the limit kept", p, err)
	}
	zero, bad := 0, -1
	if p, err = s.SetStockWith(ctx, "mug", 12, nil, nil, &zero, nil); err != nil || p.MaxPerCustomer != 0 {
		t.Fatalf("clear: %+v %v", p, err)
	}
	if _, err := s.SetStockWith(ctx, "mug", 99, nil, nil, &bad, nil); !errors.Is(err, order.ErrInvalid) {
		t.Fatalf("negative limit: %v, want invalid", err)
	}
	if p, err = s.Product(ctx, "mug"); err != nil || p.Stock != 12 || p.MaxPerCustomer != 0 {
		t.Fatalf("after a refused load: %+v %v, want nothing changed", p, err)
	}
}

// MySQL refuses an order past the limit whatever Redis believed: the
// guard gives the units back, the order ends rejected with its reason.
func TestProcessRefusesPastThePurchaseLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seedLimited(t, s, "mug", 10, 2)
	if res, err := s.Process(ctx, custOrd("o1", "mug", "ann", 2), 0); err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("first: %+v %v", res, err)
	}
	res, err := s.Process(ctx, custOrd("o2", "mug", "ann", 1), 0)
	if err != nil || res.Status != order.StatusRejected || res.Reason != order.ReasonPurchaseLimit {
		t.Fatalf("past the limit: %+v %v, want rejected %s", res, err, order.ReasonPurchaseLimit)
	}
	if res, err := s.Process(ctx, custOrd("o3", "mug", "bob", 2), 0); err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("another customer: %+v %v", res, err)
	}
	p, err := s.Product(ctx, "mug")
	if err != nil || p.Sold != 4 {
		t.Fatalf("sold = %d %v, want 4 (the refused unit given back)", p.Sold, err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM invoices WHERE order_id = 'o2'"); n != 0 {
		t.Fatalf("refused order has %d invoices", n)
	}
}

// Many orders of one customer processed at once, by single orders and by
// batches: never more than the limit invoiced.
func TestPurchaseLimitConcurrentProcess(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const limit = 3
	seedLimited(t, s, "mug", 100, limit)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i%2 == 0 {
				if _, err := s.Process(ctx, custOrd(fmt.Sprint("s", i), "mug", "bot", 1), 0); err != nil {
					t.Errorf("process %d: %v", i, err)
				}
				return
			}
			items := []BatchItem{{Order: custOrd(fmt.Sprint("b", i, "a"), "mug", "bot", 1)}, {Order: custOrd(fmt.Sprint("b", i, "b"), "mug", "bot", 1)}}
			if _, err := s.ProcessBatch(ctx, items); err != nil {
				t.Errorf("batch %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	invoiced := count(t, s, "SELECT COALESCE(SUM(qty), 0) FROM orders WHERE customer_id = 'bot' AND status = 'invoiced'")
	rejected := count(t, s, "SELECT COUNT(*) FROM orders WHERE customer_id = 'bot' AND reason = ?", order.ReasonPurchaseLimit)
	if invoiced != limit || rejected != 24-limit {
		t.Fatalf("invoiced %d units, %d rejected for the limit; want %d and %d", invoiced, rejected, limit, 24-limit)
	}
	if p, err := s.Product(ctx, "mug"); err != nil || p.Sold != limit {
		t.Fatalf("sold %d %v, want %d", p.Sold, err, limit)
	}
}

func TestProcessBatchCountsTheBatchAgainstTheLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seedLimited(t, s, "mug", 10, 2)
	seed(t, s, "cup", 10, 1)
	out, err := s.ProcessBatch(ctx, []BatchItem{
		{Order: custOrd("a", "mug", "ann", 1)},
		{Order: custOrd("b", "cup", "ann", 5)},
		{Order: custOrd("c", "mug", "ann", 1)},
		{Order: custOrd("d", "mug", "ann", 1)},
		{Order: custOrd("e", "mug", "bob", 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "", "", order.ReasonPurchaseLimit, ""}
	for i, r := range out {
		if r.Err != nil || r.Reason != want[i] {
			t.Fatalf("item %d: %+v, want reason %q", i, r, want[i])
		}
	}
}
