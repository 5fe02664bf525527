package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// The stock guard: the only statement that sells. It affects no row when
// the units do not fit, so MySQL never oversells whatever Redis believes.
const guardSQL = "UPDATE products SET sold = sold + ? WHERE sku = ? AND sold + ? <= stock"

// Process turns an order into an invoice, or a rejection when the stock is
// sold out (order.ReasonCompensated) or the order would take its customer
// past the SKU's purchase limit (order.ReasonPurchaseLimit), in one
// transaction. With fence > 0 it first records the order's
// fencing token and refuses (order.ErrStaleFence, nothing written) when a
// higher one is already recorded. An order processed before is reported as
// Duplicate with its first outcome, and writes nothing. An unknown SKU
// fails with order.ErrUnknownSKU and writes nothing. Deadlocks and lock
// wait timeouts come back wrapped: test them with IsTransient.
func (s *Store) Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error) {
	if err := validateOrder(o); err != nil {
		return order.Processed{}, err
	}
	var res order.Processed
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var recorded int64
		if fence > 0 {
			fences, err := recordFences(ctx, tx, map[string]int64{o.ID: fence})
			if err != nil {
				return err
			}
			recorded = fences[o.ID]
		}
		stale := recorded > fence
		rec, found, err := lookupOrder(ctx, tx, o.ID)
		switch {
		case err != nil:
			return err
		case found && (rec.SKU != o.SKU || !stale):
			// Another SKU's order is reported whatever the tokens (see
			// fencesAndExisting).
			res = rec.result()
			return nil
		case stale:
			return staleFence(o.ID, fence, recorded)
		}
		res, err = placeOrder(ctx, tx, o, fence)
		return err
	})
	if isDuplicateKey(err) {
		// A concurrent twin committed the same order first; ours rolled back.
		rec, rerr := s.Order(ctx, o.ID)
		if rerr != nil {
			return order.Processed{}, fmt.Errorf("process order %s after a concurrent twin: %w", o.ID, rerr)
		}
		return rec.result(), nil
	}
	if err != nil {
		return order.Processed{}, fmt.Errorf("process order %s: %w", o.ID, err)
	}
	return res, nil
}

// placeOrder applies the stock guard and writes the order, plus its invoice
// when the units fit.
func placeOrder(ctx context.Context, tx *sqlx.Tx, o order.Order, fence int64) (order.Processed, error) {
	r, err := tx.ExecContext(ctx, guardSQL, o.Qty, o.SKU, o.Qty)
	if err != nil {
		return order.Processed{}, fmt.Errorf("guard stock sku=%s: %w", o.SKU, err)
	}
	taken, err := r.RowsAffected()
	if err != nil {
		return order.Processed{}, fmt.Errorf("guard stock sku=%s: %w", o.SKU, err)
	}
	var p struct {
		Price int64 `db:"price_cents"`
		Max   int   `db:"max_per_customer"`
	}
	err = tx.GetContext(ctx, &p, "SELECT price_cents, max_per_customer FROM products WHERE sku = ?", o.SKU)
	if errors.Is(err, sql.ErrNoRows) {
		return order.Processed{}, fmt.Errorf("read product sku=%s: %w", o.SKU, order.ErrUnknownSKU)
	}
	if err != nil {
		return order.Processed{}, fmt.Errorf("read price sku=%s: %w", o.SKU, err)
	}
	reason := ""
	if taken != 1 {
		reason = order.ReasonCompensated
	} else if reason, err = limitGuard(ctx, tx, o, p.Max); err != nil {
		return order.Processed{}, err
	}
	if reason != "" {
		row := newOrderRow(o, fence, order.StatusRejected, reason)
		if err := insertOrders(ctx, tx, []orderRow{row}); err != nil {
			return order.Processed{}, err
		}
		return order.Processed{Status: order.StatusRejected, Reason: reason}, nil
	}
	price := p.Price
	if err := insertOrders(ctx, tx, []orderRow{newOrderRow(o, fence, order.StatusInvoiced, "")}); err != nil {
		return order.Processed{}, err
	}
	inv := invoiceRow{OrderID: o.ID, SKU: o.SKU, Qty: o.Qty, AmountCents: price * int64(o.Qty)}
	r, err = tx.NamedExecContext(ctx, insertInvoiceSQL, inv)
	if err != nil {
		return order.Processed{}, fmt.Errorf("insert invoice for order %s: %w", o.ID, err)
	}
	id, err := r.LastInsertId()
	if err != nil {
		return order.Processed{}, fmt.Errorf("read invoice id of order %s: %w", o.ID, err)
	}
	return order.Processed{Status: order.StatusInvoiced, InvoiceID: id, AmountCents: inv.AmountCents}, nil
}

// limitGuard refuses (order.ReasonPurchaseLimit) an order whose units the
// guard took but that would take its customer past the SKU's purchase
// limit, counting the customer's invoiced units of the SKU, and gives the
// units back to the product. It runs with the product row locked by the
// guard, so orders of one SKU pass it one at a time; the count is a
// locking read, which sees every committed order whatever the
// transaction's snapshot. No limit (0) costs no query.
func limitGuard(ctx context.Context, tx *sqlx.Tx, o order.Order, limit int) (string, error) {
	if limit <= 0 {
		return "", nil
	}
	had, err := customerUnits(ctx, tx, o.SKU, []string{o.CustomerID})
	if err != nil {
		return "", err
	}
	if had[o.CustomerID]+o.Qty <= limit {
		return "", nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE products SET sold = sold - ? WHERE sku = ?", o.Qty, o.SKU); err != nil {
		return "", fmt.Errorf("give back units sku=%s: %w", o.SKU, err)
	}
	return order.ReasonPurchaseLimit, nil
}

// customerUnits sums the invoiced units of sku per customer, for the
// customers given, with a locking read (LOCK IN SHARE MODE reads the
// latest committed rows, not the transaction's snapshot).
func customerUnits(ctx context.Context, tx *sqlx.Tx, sku string, customers []string) (map[string]int, error) {
	query, args, err := sqlx.In(`SELECT customer_id, SUM(qty) AS units FROM orders FORCE INDEX (orders_sku_customer)
		WHERE sku = ? AND customer_id IN (?) AND status = ? GROUP BY customer_id LOCK IN SHARE MODE`,
		sku, customers, string(order.StatusInvoiced))
	if err != nil {
		return nil, fmt.Errorf("build customer units lookup: %w", err)
	}
	var rows []struct {
		Customer string `db:"customer_id"`
		Units    int    `db:"units"`
	}
	if err := tx.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("count customer units sku=%s: %w", sku, err)
	}
	had := make(map[string]int, len(rows))
	for _, r := range rows {
		had[r.Customer] = r.Units
	}
	return had, nil
}

// validateOrder checks what the schema relies on: a usable id, and the
// domain's own rules (qty >= 1 keeps the guard from ever lowering sold).
func validateOrder(o order.Order) error {
	if o.ID == "" || len(o.ID) > 40 {
		return order.Invalid("order id must be 1-40 characters")
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("process order %s: %w", o.ID, err)
	}
	return nil
}

func staleFence(id string, fence, recorded int64) error {
	return fmt.Errorf("process order %s with fence %d: %w (recorded %d)", id, fence, order.ErrStaleFence, recorded)
}
