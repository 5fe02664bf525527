package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// newStore opens a migrated Store on a fresh database, closed at cleanup
// (before testenv drops the database).
func newStore(t testing.TB) *Store {
	t.Helper()
	s := openStore(t, testenv.MySQLDSN(t))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func openStore(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// seed creates a product with stock units at price cents each.
func seed(t testing.TB, s *Store, sku string, stock int, price int64) {
	t.Helper()
	if _, err := s.SetStock(context.Background(), sku, stock, nil, &price); err != nil {
		t.Fatalf("SetStock %s: %v", sku, err)
	}
}

func ord(id, sku string, qty int) order.Order {
	return order.Order{ID: id, SKU: sku, Qty: qty, CustomerID: "c-" + id}
}

// allOrders reads every order with its invoice, ordered by id.
func allOrders(t testing.TB, s *Store) []OrderRecord {
	t.Helper()
	recs := []OrderRecord{}
	if err := s.DB().SelectContext(context.Background(), &recs, orderSelect+" ORDER BY o.order_id"); err != nil {
		t.Fatalf("read orders: %v", err)
	}
	return recs
}

func count(t testing.TB, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.DB().GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// checkLedger asserts MySQL's own invariant for sku: sold never exceeds
// stock and equals the units invoiced.
func checkLedger(t testing.TB, s *Store, sku string) Product {
	t.Helper()
	ctx := context.Background()
	p, err := s.Product(ctx, sku)
	if err != nil {
		t.Fatalf("Product %s: %v", sku, err)
	}
	units, err := s.SoldInvoiced(ctx, sku)
	if err != nil {
		t.Fatalf("SoldInvoiced %s: %v", sku, err)
	}
	if p.Sold > p.Stock || p.Sold != units {
		t.Fatalf("sku %s: stock=%d sold=%d invoiced units=%d", sku, p.Stock, p.Sold, units)
	}
	return p
}

// errName names the domain sentinel err wraps, for comparisons.
func errName(err error) string {
	for _, e := range []error{order.ErrUnknownSKU, order.ErrStaleFence, order.ErrInvalid, order.ErrConflict} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return ""
}

func TestOpenForcesParseTime(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	s := openStore(t, dsn[:strings.Index(dsn, "?")])
	var now time.Time
	if err := s.DB().GetContext(context.Background(), &now, "SELECT NOW(3)"); err != nil || now.IsZero() {
		t.Fatalf("scan DATETIME into time.Time: %v, %v", now, err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if _, err := Open(context.Background(), "not a dsn", Options{}); err == nil {
		t.Fatal("Open accepted a malformed DSN")
	}
}
