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

// under is o as a gateway sends it when Redis reserved it under the
// purchase limit limit (0: none).
func under(o order.Order, limit int) order.Order {
	o.MaxPerCustomer = &limit
	return o
}

// TestLimitJudgedAsWhenAccepted: MySQL judges an order by the purchase
// limit Redis reserved it under, which the order carries, not by the
// product's limit when the order reaches MySQL: a limit lowered or set
// after orders were accepted turns none of them into a rejection, also
// when orders accepted under a raised limit are invoiced first; a customer
// past the limits its orders were accepted under and the product's limit
// now (Redis lost its count in a failover) is still refused; an order that
// carries no limit (an earlier gateway's) is judged by the product's
// current limit. Each case
// runs through Process, one order after the other, and through one
// ProcessBatch of all its orders in the same order.
func TestLimitJudgedAsWhenAccepted(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ann := func(n, limit int) order.Order { return under(custOrd(fmt.Sprint("a", n), "", "ann", 1), limit) }
	cases := []struct {
		name        string
		limit, now  int // the product's limit when the orders were accepted, and when processed
		orders      []order.Order
		wantInvoice []bool
	}{{
		name: "lowered after acceptance", limit: 5, now: 2,
		orders:      []order.Order{ann(1, 5), ann(2, 5), ann(3, 5)},
		wantInvoice: []bool{true, true, true},
	}, {
		name: "accepted with no limit, then one set", limit: 0, now: 2,
		orders:      []order.Order{ann(1, 0), ann(2, 0), ann(3, 0)},
		wantInvoice: []bool{true, true, true},
	}, {
		// a1, a2 were accepted under 2, the limit was raised to 5 and
		// a3-a5 accepted, then lowered to 2 again; the later orders reach
		// MySQL first. Redis held ann to 5 in all.
		name: "raised, lowered, the later orders first", limit: 2, now: 2,
		orders:      []order.Order{ann(3, 5), ann(4, 5), ann(5, 5), ann(2, 2), ann(1, 2)},
		wantInvoice: []bool{true, true, true, true, true},
	}, {
		name: "past the limit accepted under: a lost count", limit: 2, now: 2,
		orders:      []order.Order{ann(1, 2), ann(2, 2), ann(3, 2), ann(4, 2)},
		wantInvoice: []bool{true, true, false, false},
	}, {
		// The product's limit now could have admitted them: nothing to
		// refuse.
		name: "a lost count, the limit raised since", limit: 2, now: 4,
		orders:      []order.Order{ann(1, 2), ann(2, 2), ann(3, 2), ann(4, 2), ann(5, 2)},
		wantInvoice: []bool{true, true, true, true, false},
	}, {
		name: "no count under a limit before", limit: 0, now: 2,
		orders:      []order.Order{ann(1, 0), ann(2, 0), ann(3, 0), ann(4, 2), ann(5, 2), ann(6, 2)},
		wantInvoice: []bool{true, true, true, true, true, false},
	}, {
		name: "no limit carried: the product's", limit: 5, now: 2,
		orders: []order.Order{custOrd("a1", "", "ann", 1), custOrd("a2", "", "ann", 1),
			custOrd("a3", "", "ann", 1)},
		wantInvoice: []bool{true, true, false},
	}}
	for n, c := range cases {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%t", c.name, batch), func(t *testing.T) {
				sku := fmt.Sprintf("lim%d-%t", n, batch)
				seedLimited(t, s, sku, 100, c.limit)
				now := c.now
				if _, err := s.SetStockWith(ctx, sku, 100, nil, nil, &now, nil); err != nil {
					t.Fatal(err)
				}
				var got []order.Processed
				var items []BatchItem
				for _, o := range c.orders {
					o.SKU, o.ID = sku, sku+"-"+o.ID
					if !batch {
						res, err := s.Process(ctx, o, 0)
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, res)
					}
					items = append(items, BatchItem{Order: o})
				}
				if batch {
					out, err := s.ProcessBatch(ctx, items)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range out {
						if r.Err != nil {
							t.Fatal(r.Err)
						}
						got = append(got, r.Processed)
					}
				}
				for i, res := range got {
					want := order.Processed{Status: order.StatusInvoiced}
					if !c.wantInvoice[i] {
						want = order.Processed{Status: order.StatusRejected, Reason: order.ReasonPurchaseLimit}
					}
					if res.Status != want.Status || res.Reason != want.Reason {
						t.Errorf("order %d (%s): %s %s, want %s %s", i, items[i].Order.ID, res.Status, res.Reason, want.Status, want.Reason)
					}
					// The row records the limit the order was judged by.
					o, judged := items[i].Order, c.now
					if o.MaxPerCustomer != nil {
						judged = *o.MaxPerCustomer
					}
					if n := count(t, s, "SELECT max_per_customer FROM orders WHERE order_id = ?", o.ID); n != judged {
						t.Errorf("order %s recorded under limit %d, want %d", o.ID, n, judged)
					}
				}
				checkLedger(t, s, sku)
			})
		}
	}
}
