package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/pkg/order"
)

func TestProcessInvoicesOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "mug", 5, 250)

	first, err := s.Process(ctx, ord("o-1", "mug", 2), 1)
	if err != nil {
		t.Fatalf("Process: %v", err)
	}
	if first.Status != order.StatusInvoiced || first.InvoiceID == 0 || first.AmountCents != 500 || first.Duplicate {
		t.Fatalf("first Process = %+v, want invoiced for 500 cents", first)
	}
	again, err := s.Process(ctx, ord("o-1", "mug", 2), 1)
	if err != nil {
		t.Fatalf("repeated Process: %v", err)
	}
	want := first
	want.Duplicate = true
	want.Recorded = order.Order{ID: "o-1", SKU: "mug", Qty: 2, CustomerID: "c-o-1"}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Fatalf("repeated Process (-want +got):\n%s", diff)
	}
	wantOrders := []OrderRecord{{ID: "o-1", SKU: "mug", CustomerID: "c-o-1", Status: "invoiced",
		Qty: 2, InvoiceID: first.InvoiceID, AmountCents: 500}}
	if diff := cmp.Diff(wantOrders, allOrders(t, s)); diff != "" {
		t.Fatalf("orders (-want +got):\n%s", diff)
	}
	if p := checkLedger(t, s, "mug"); p.Sold != 2 {
		t.Fatalf("sold = %d, want 2", p.Sold)
	}
	if n, err := s.InvoiceCount(ctx, "mug"); err != nil || n != 1 {
		t.Fatalf("InvoiceCount = %d, %v; want 1", n, err)
	}
}

func TestProcessSoldOutIsRejected(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "mug", 3, 100)

	if res, err := s.Process(ctx, ord("o-1", "mug", 2), 0); err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("Process o-1 = %+v, %v; want invoiced", res, err)
	}
	res, err := s.Process(ctx, ord("o-2", "mug", 2), 0)
	if err != nil {
		t.Fatalf("Process o-2: %v", err)
	}
	want := order.Processed{Status: order.StatusRejected, Reason: order.ReasonCompensated}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("Process o-2 (-want +got):\n%s", diff)
	}
	rec, err := s.Order(ctx, "o-2")
	if err != nil || rec.Status != "rejected" || rec.Reason != order.ReasonCompensated || rec.InvoiceID != 0 {
		t.Fatalf("Order o-2 = %+v, %v; want rejected sold_out without invoice", rec, err)
	}
	// The last unit still sells.
	if res, err := s.Process(ctx, ord("o-3", "mug", 1), 0); err != nil || res.Status != order.StatusInvoiced {
		t.Fatalf("Process o-3 = %+v, %v; want invoiced", res, err)
	}
	if p := checkLedger(t, s, "mug"); p.Sold != 3 {
		t.Fatalf("sold = %d, want 3", p.Sold)
	}
}

func TestProcessUnknownSKUWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	_, err := s.Process(ctx, ord("o-1", "ghost", 1), 4)
	if !errors.Is(err, order.ErrUnknownSKU) {
		t.Fatalf("Process = %v, want ErrUnknownSKU", err)
	}
	if _, err := s.Order(ctx, "o-1"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("Order = %v, want ErrNotFound", err)
	}
	for _, table := range []string{"orders", "invoices", "order_fences", "products"} {
		if n := count(t, s, "SELECT COUNT(*) FROM "+table); n != 0 {
			t.Errorf("%s has %d rows, want 0", table, n)
		}
	}
}

func TestProcessRefusesInvalidOrder(t *testing.T) {
	s := newStore(t)
	seed(t, s, "mug", 3, 100)
	for _, o := range []order.Order{ord("o-1", "mug", 0), ord("", "mug", 1), ord("o-1", "mug", -2)} {
		if _, err := s.Process(context.Background(), o, 0); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("Process(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	if p := checkLedger(t, s, "mug"); p.Sold != 0 {
		t.Fatalf("sold = %d after invalid orders", p.Sold)
	}
}

// TestProcessStaleFence: a worker whose lock expired (fence 3) comes back
// after a newer holder (fence 7) processed the order; it is refused and the
// newer write stands.
func TestProcessStaleFence(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "mug", 5, 100)

	newer, err := s.Process(ctx, ord("o-1", "mug", 1), 7)
	if err != nil || newer.Status != order.StatusInvoiced {
		t.Fatalf("Process with fence 7 = %+v, %v", newer, err)
	}
	if _, err := s.Process(ctx, ord("o-1", "mug", 1), 3); !errors.Is(err, order.ErrStaleFence) {
		t.Fatalf("Process with fence 3 = %v, want ErrStaleFence", err)
	}
	// A stale token on an order never processed is refused too.
	if _, err := s.Process(ctx, ord("o-2", "mug", 1), 9); err != nil {
		t.Fatalf("Process o-2 fence 9: %v", err)
	}
	if _, err := s.Process(ctx, ord("o-2", "mug", 1), 8); !errors.Is(err, order.ErrStaleFence) {
		t.Fatalf("Process o-2 fence 8 = %v, want ErrStaleFence", err)
	}
	// The holder of the recorded token may retry.
	if res, err := s.Process(ctx, ord("o-1", "mug", 1), 7); err != nil || !res.Duplicate || res.InvoiceID != newer.InvoiceID {
		t.Fatalf("retry with fence 7 = %+v, %v; want the first invoice as a duplicate", res, err)
	}
	if f := count(t, s, "SELECT fence FROM order_fences WHERE order_id = 'o-1'"); f != 7 {
		t.Fatalf("recorded fence = %d, want 7", f)
	}
	if f := count(t, s, "SELECT fence FROM orders WHERE order_id = 'o-1'"); f != 7 {
		t.Fatalf("order written with fence %d, want 7", f)
	}
	if p := checkLedger(t, s, "mug"); p.Sold != 2 {
		t.Fatalf("sold = %d, want 2", p.Sold)
	}
}

// TestProcessNeverOversells races 200 distinct orders for 50 units.
func TestProcessNeverOversells(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "hot", 50, 100)

	results := make([]order.Processed, 200)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = s.Process(ctx, ord(fmt.Sprintf("o-%03d", i), "hot", 1), int64(i+1))
		})
	}
	wg.Wait()
	got := map[order.Status]int{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("Process #%d: %v", i, errs[i])
		}
		got[r.Status]++
	}
	if diff := cmp.Diff(map[order.Status]int{order.StatusInvoiced: 50, order.StatusRejected: 150}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if p := checkLedger(t, s, "hot"); p.Sold != 50 {
		t.Fatalf("sold = %d, want 50", p.Sold)
	}
	if n, err := s.InvoiceCount(ctx, "hot"); err != nil || n != 50 {
		t.Fatalf("InvoiceCount = %d, %v; want 50", n, err)
	}
}

// TestProcessConcurrentTwins delivers one order to 20 workers at once
// (no fencing): one invoice, and every worker reports it.
func TestProcessConcurrentTwins(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "hot", 10, 100)

	results := make([]order.Processed, 20)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], errs[i] = s.Process(ctx, ord("o-twin", "hot", 2), 0) })
	}
	wg.Wait()
	firsts := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("Process #%d: %v", i, errs[i])
		}
		if !r.Duplicate {
			firsts++
		}
		if r.Status != order.StatusInvoiced || r.InvoiceID != results[0].InvoiceID {
			t.Fatalf("Process #%d = %+v, want the one invoice %d", i, r, results[0].InvoiceID)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d workers reported a new order, want 1", firsts)
	}
	if p := checkLedger(t, s, "hot"); p.Sold != 2 {
		t.Fatalf("sold = %d, want 2", p.Sold)
	}
}

// TestProcessLockWaitIsTransient holds the product row while a worker with
// a 1 s lock wait timeout processes an order: the error keeps MySQL's
// cause and classifies as transient, and nothing is written.
func TestProcessLockWaitIsTransient(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	s := openStore(t, dsn)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	seed(t, s, "hot", 10, 100)
	impatient := openStore(t, dsn+"&innodb_lock_wait_timeout=1")

	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT sold FROM products WHERE sku = 'hot' FOR UPDATE"); err != nil {
		t.Fatalf("lock product: %v", err)
	}
	_, err = impatient.Process(ctx, ord("o-1", "hot", 1), 0)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 || !IsTransient(err) {
		t.Fatalf("Process under a held lock = %v, want a transient 1205", err)
	}
	_ = tx.Rollback()
	if n := count(t, s, "SELECT COUNT(*) FROM orders"); n != 0 {
		t.Fatalf("%d orders written by a failed transaction", n)
	}
}

// TestSchemaRefusesOversell: even a statement that bypasses the guard
// cannot push sold past stock or below zero.
func TestSchemaRefusesOversell(t *testing.T) {
	s := newStore(t)
	seed(t, s, "mug", 3, 100)
	for _, q := range []string{
		"UPDATE products SET sold = stock + 1 WHERE sku = 'mug'",
		"UPDATE products SET sold = -1 WHERE sku = 'mug'",
	} {
		if _, err := s.DB().ExecContext(context.Background(), q); err == nil {
			t.Errorf("%s: accepted, want a CHECK violation", q)
		}
	}
	if p := checkLedger(t, s, "mug"); p.Sold != 0 {
		t.Fatalf("sold = %d, want 0", p.Sold)
	}
}
