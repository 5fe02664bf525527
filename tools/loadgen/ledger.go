package loadgen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Ledger reads what MySQL holds for one SKU: the truth the correctness
// check compares the load's answers with.
type Ledger struct {
	DB *sql.DB
}

// Books are one SKU's rows in MySQL.
type Books struct {
	// Stock and Sold are the products row.
	Stock int64 `json:"stock"`
	Sold  int64 `json:"sold"`
	// Invoices and InvoicedUnits count the invoices rows and their qty.
	Invoices      int64 `json:"invoices"`
	InvoicedUnits int64 `json:"invoiced_units"`
	// Rejected counts orders the worker refused (sold out in MySQL).
	Rejected int64 `json:"rejected"`
}

// Invoices counts sku's invoices (a cheap probe: invoices has an index on
// sku).
func (l Ledger) Invoices(ctx context.Context, sku string) (int64, error) {
	var n int64
	if err := l.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM invoices WHERE sku = ?", sku).Scan(&n); err != nil {
		return 0, fmt.Errorf("count invoices sku=%s: %w", sku, err)
	}
	return n, nil
}

// Books reads sku's product row, invoices and rejected orders. A missing
// product reads as zero stock.
func (l Ledger) Books(ctx context.Context, sku string) (Books, error) {
	var b Books
	err := l.DB.QueryRowContext(ctx, "SELECT stock, sold FROM products WHERE sku = ?", sku).Scan(&b.Stock, &b.Sold)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Books{}, fmt.Errorf("read product sku=%s: %w", sku, err)
	}
	err = l.DB.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(qty), 0) FROM invoices WHERE sku = ?", sku).
		Scan(&b.Invoices, &b.InvoicedUnits)
	if err != nil {
		return Books{}, fmt.Errorf("count invoices sku=%s: %w", sku, err)
	}
	err = l.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE sku = ? AND status = 'rejected'", sku).
		Scan(&b.Rejected)
	if err != nil {
		return Books{}, fmt.Errorf("count rejected orders sku=%s: %w", sku, err)
	}
	return b, nil
}
