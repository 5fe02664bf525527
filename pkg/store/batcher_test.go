package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"surge/pkg/order"
)

// TestBatcherCoalescesWithoutOverselling: 300 concurrent orders for 100
// units through the batcher give exactly 100 invoices, in fewer
// transactions than orders.
func TestBatcherCoalescesWithoutOverselling(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.SetStock(ctx, "hot", 100, nil, nil); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(s, BatcherOptions{MaxBatch: 64, Linger: 5 * time.Millisecond})
	defer b.Close()
	var mu sync.Mutex
	counts := map[order.Status]int{}
	var wg sync.WaitGroup
	for i := 0; i < 300; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := order.Order{ID: order.IDFor("c", fmt.Sprint(i), 0), SKU: "hot", Qty: 1, CustomerID: "c"}
			res, err := b.Process(ctx, o, 0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[res.Status]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if counts[order.StatusInvoiced] != 100 || counts[order.StatusRejected] != 200 {
		t.Fatalf("outcomes %v, want 100 invoiced and 200 rejected", counts)
	}
	p, err := s.Product(ctx, "hot")
	if err != nil || p.Sold != 100 {
		t.Fatalf("sold %d (%v), want 100", p.Sold, err)
	}
	batches, orders := b.Stats()
	if orders != 300 || batches >= orders {
		t.Fatalf("%d orders in %d transactions: want 300 orders coalesced into fewer transactions", orders, batches)
	}
}

// TestBatcherPerItemErrors: an unknown SKU fails alone; its batch-mates
// are invoiced, and a repeat is reported as a duplicate.
func TestBatcherPerItemErrors(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.SetStock(ctx, "ok", 5, nil, nil); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(s, BatcherOptions{Linger: 20 * time.Millisecond})
	defer b.Close()
	good := order.Order{ID: order.IDFor("c", "good", 0), SKU: "ok", Qty: 2, CustomerID: "c"}
	bad := order.Order{ID: order.IDFor("c", "bad", 0), SKU: "missing", Qty: 1, CustomerID: "c"}
	errs := make(chan error, 2)
	go func() { _, err := b.Process(ctx, bad, 0); errs <- err }()
	res, err := b.Process(ctx, good, 0)
	if err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("good order: %+v %v", res, err)
	}
	if err := <-errs; !errors.Is(err, order.ErrUnknownSKU) {
		t.Fatalf("bad order: %v, want unknown sku", err)
	}
	again, err := b.Process(ctx, good, 0)
	rec, rerr := s.Order(ctx, good.ID)
	if err != nil || rerr != nil || !again.Duplicate || again.InvoiceID == 0 || again.InvoiceID != rec.InvoiceID {
		t.Fatalf("repeat: %+v %v, want the first invoice %+v (%v) as a duplicate", again, err, rec, rerr)
	}
}

// TestBatcherClosed: calls after Close fail instead of hanging.
func TestBatcherClosed(t *testing.T) {
	s := newStore(t)
	b := NewBatcher(s, BatcherOptions{})
	b.Close()
	_, err := b.Process(context.Background(), order.Order{ID: order.IDFor("c", "x", 0), SKU: "ok", Qty: 1, CustomerID: "c"}, 0)
	if err == nil {
		t.Fatal("Process after Close succeeded")
	}
}
