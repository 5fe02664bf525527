package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// OrderRecord is an order as MySQL knows it, with its invoice when it was
// invoiced (InvoiceID and AmountCents are 0 otherwise).
type OrderRecord struct {
	ID          string `db:"order_id"`
	SKU         string `db:"sku"`
	CustomerID  string `db:"customer_id"`
	Status      string `db:"status"`
	Reason      string `db:"reason"`
	Qty         int    `db:"qty"`
	InvoiceID   int64  `db:"invoice_id"`
	AmountCents int64  `db:"amount_cents"`
}

// result is what a repeated Process of this order reports.
func (r OrderRecord) result() order.Processed {
	return order.Processed{
		Status:      order.Status(r.Status),
		Reason:      r.Reason,
		InvoiceID:   r.InvoiceID,
		AmountCents: r.AmountCents,
		Duplicate:   true,
		Recorded:    order.Order{ID: r.ID, SKU: r.SKU, Qty: r.Qty, CustomerID: r.CustomerID},
	}
}

const orderSelect = `SELECT o.order_id, o.sku, o.customer_id, o.status, COALESCE(o.reason, '') AS reason,
	o.qty, COALESCE(i.invoice_id, 0) AS invoice_id, COALESCE(i.amount_cents, 0) AS amount_cents
	FROM orders o LEFT JOIN invoices i ON i.order_id = o.order_id`

// Order reads one order; order.ErrNotFound when MySQL has none (it may
// still be accepted and waiting in the queue).
func (s *Store) Order(ctx context.Context, id string) (OrderRecord, error) {
	rec, found, err := lookupOrder(ctx, s.db, id)
	if err != nil {
		return OrderRecord{}, err
	}
	if !found {
		return OrderRecord{}, fmt.Errorf("read order %s: %w", id, order.ErrNotFound)
	}
	return rec, nil
}

func lookupOrder(ctx context.Context, q sqlx.QueryerContext, id string) (OrderRecord, bool, error) {
	var rec OrderRecord
	err := sqlx.GetContext(ctx, q, &rec, orderSelect+" WHERE o.order_id = ?", id)
	if errors.Is(err, sql.ErrNoRows) {
		return OrderRecord{}, false, nil
	}
	if err != nil {
		return OrderRecord{}, false, fmt.Errorf("read order %s: %w", id, err)
	}
	return rec, true, nil
}

// lookupOrders reads the orders among ids that already exist, by id.
func lookupOrders(ctx context.Context, q sqlx.QueryerContext, ids []string) (map[string]OrderRecord, error) {
	found := make(map[string]OrderRecord)
	if len(ids) == 0 {
		return found, nil
	}
	query, args, err := sqlx.In(orderSelect+" WHERE o.order_id IN (?)", ids)
	if err != nil {
		return nil, fmt.Errorf("build order lookup: %w", err)
	}
	var recs []OrderRecord
	if err := sqlx.SelectContext(ctx, q, &recs, query, args...); err != nil {
		return nil, fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	for _, r := range recs {
		found[r.ID] = r
	}
	return found, nil
}

// InvoiceCount returns how many invoices a SKU has.
func (s *Store) InvoiceCount(ctx context.Context, sku string) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, "SELECT COUNT(*) FROM invoices WHERE sku = ?", sku); err != nil {
		return 0, fmt.Errorf("count invoices sku=%s: %w", sku, err)
	}
	return n, nil
}

// SoldInvoiced returns the units invoiced for a SKU (the sum of its invoice
// quantities), which must equal products.sold.
func (s *Store) SoldInvoiced(ctx context.Context, sku string) (units int, err error) {
	err = s.db.GetContext(ctx, &units, "SELECT COALESCE(SUM(qty), 0) FROM invoices WHERE sku = ?", sku)
	if err != nil {
		return 0, fmt.Errorf("sum invoiced units sku=%s: %w", sku, err)
	}
	return units, nil
}

// fencedRecord is an order's recorded fencing token with the order MySQL
// holds under its id, if any (Found).
type fencedRecord struct {
	Fence int64 `db:"recorded_fence"`
	Found bool  `db:"found"`
	OrderRecord
}

// lookupFenced reads the recorded fence of each of ids (whose rows exist)
// joined with its order and invoice, by order id.
func lookupFenced(ctx context.Context, q sqlx.QueryerContext, ids []string) (map[string]fencedRecord, error) {
	query, args, err := sqlx.In(`SELECT f.order_id AS fence_order_id, f.fence AS recorded_fence, o.order_id IS NOT NULL AS found,
		COALESCE(o.order_id, '') AS order_id, COALESCE(o.sku, '') AS sku, COALESCE(o.customer_id, '') AS customer_id,
		COALESCE(o.status, '') AS status, COALESCE(o.reason, '') AS reason, COALESCE(o.qty, 0) AS qty,
		COALESCE(i.invoice_id, 0) AS invoice_id, COALESCE(i.amount_cents, 0) AS amount_cents
		FROM order_fences f FORCE INDEX (PRIMARY)
		LEFT JOIN orders o ON o.order_id = f.order_id LEFT JOIN invoices i ON i.order_id = f.order_id
		WHERE f.order_id IN (?)`, ids)
	if err != nil {
		return nil, fmt.Errorf("build fence lookup: %w", err)
	}
	var recs []struct {
		ID string `db:"fence_order_id"`
		fencedRecord
	}
	if err := sqlx.SelectContext(ctx, q, &recs, query, args...); err != nil {
		return nil, fmt.Errorf("read fences and orders of %d ids: %w", len(ids), err)
	}
	out := make(map[string]fencedRecord, len(recs))
	for _, r := range recs {
		out[r.ID] = r.fencedRecord
	}
	return out, nil
}
