package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"surge/pkg/order"
)

// TestProcessBatchNeverOversells runs batches from several goroutines,
// alongside single-order workers, against two hot SKUs whose demand far
// exceeds their stock.
func TestProcessBatchNeverOversells(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "A", 100, 10) // orders of 1 unit: every unit must sell
	seed(t, s, "B", 37, 10)  // orders of 1-3 units

	var mu sync.Mutex
	invoiced := map[string]int{}
	record := func(it BatchItem, r BatchResult) {
		if r.Err != nil {
			t.Errorf("order %s: %v", it.Order.ID, r.Err)
			return
		}
		if r.Status == order.StatusInvoiced {
			mu.Lock()
			invoiced[it.Order.SKU] += it.Order.Qty
			mu.Unlock()
		}
	}
	makeItem := func(worker, n int) BatchItem {
		id := fmt.Sprintf("w%d-%03d", worker, n)
		if n%2 == 0 {
			return item(id, "A", 1, int64(n+1))
		}
		return item(id, "B", 1+n%3, int64(n+1))
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for b := range 4 {
				items := make([]BatchItem, 20)
				for i := range items {
					items[i] = makeItem(w, b*20+i)
				}
				out, err := s.ProcessBatch(ctx, items)
				if err != nil {
					t.Errorf("ProcessBatch: %v", err)
					return
				}
				for i, r := range out {
					record(items[i], r)
				}
			}
		})
	}
	for w := 6; w < 8; w++ {
		wg.Go(func() {
			for n := range 30 {
				it := makeItem(w, n)
				res, err := s.Process(ctx, it.Order, it.Fence)
				record(it, BatchResult{Processed: res, Err: err})
			}
		})
	}
	wg.Wait()
	if a := checkLedger(t, s, "A"); a.Sold != 100 || invoiced["A"] != 100 {
		t.Fatalf("A: sold %d, results invoiced %d; want 100 of 100", a.Sold, invoiced["A"])
	}
	if n, err := s.InvoiceCount(ctx, "A"); err != nil || n != 100 {
		t.Fatalf("A invoices = %d, %v; want 100", n, err)
	}
	if b := checkLedger(t, s, "B"); b.Sold != invoiced["B"] {
		t.Fatalf("B: sold %d, results invoiced %d", b.Sold, invoiced["B"])
	}
}

// TestProcessBatchConcurrentTwins submits the same batch from four
// goroutines (a redelivery storm, no fencing): each order is written once
// and every submitter reports the same invoice.
func TestProcessBatchConcurrentTwins(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "A", 10, 10)
	items := make([]BatchItem, 15)
	for i, id := range ids("o", len(items)) {
		items[i] = item(id, "A", 1, 0)
	}
	outs := make([][]BatchResult, 4)
	errs := make([]error, len(outs))
	var wg sync.WaitGroup
	for g := range outs {
		wg.Go(func() { outs[g], errs[g] = s.ProcessBatch(ctx, items) })
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("ProcessBatch #%d: %v", g, err)
		}
	}
	for i, it := range items {
		firsts := 0
		for g := range outs {
			r := outs[g][i]
			if r.Err != nil || r.Status != outs[0][i].Status {
				t.Fatalf("order %s: submitter %d got %+v, submitter 0 got %+v", it.Order.ID, g, r, outs[0][i])
			}
			if !r.Duplicate {
				firsts++
			}
		}
		if firsts != 1 {
			t.Fatalf("order %s written by %d submitters, want 1", it.Order.ID, firsts)
		}
	}
	if a := checkLedger(t, s, "A"); a.Sold != 10 {
		t.Fatalf("sold = %d, want 10", a.Sold)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM orders"); n != 15 {
		t.Fatalf("%d orders, want 15", n)
	}
}
