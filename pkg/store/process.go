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
// past every purchase limit that could have admitted it
// (order.ReasonPurchaseLimit, see holding.refuses), in one transaction.
// With fence > 0 it first records the order's fencing token and refuses
// (order.ErrStaleFence, nothing written) when a higher one is already
// recorded. An order processed before is reported as
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
	reason, limit := "", acceptedUnder(o, p.Max)
	if taken != 1 {
		reason = order.ReasonCompensated
	} else if reason, err = limitGuard(ctx, tx, o, limit, p.Max); err != nil {
		return order.Processed{}, err
	}
	if reason != "" {
		row := newOrderRow(o, fence, order.StatusRejected, reason, limit)
		if err := insertOrders(ctx, tx, []orderRow{row}); err != nil {
			return order.Processed{}, err
		}
		return order.Processed{Status: order.StatusRejected, Reason: reason}, nil
	}
	price := p.Price
	if err := insertOrders(ctx, tx, []orderRow{newOrderRow(o, fence, order.StatusInvoiced, "", limit)}); err != nil {
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

// acceptedUnder is the purchase limit o was accepted under (0: none): the
// one Redis reserved it under, which the order carries, or, for an order
// that does not say (a gateway of an earlier version), now, the product's
// limit.
func acceptedUnder(o order.Order, now int) int {
	if o.MaxPerCustomer != nil {
		return *o.MaxPerCustomer
	}
	return now
}

// holding is what a customer holds of a SKU as the limit guard counts it:
// the units of its invoiced orders accepted under a limit, and the
// loosest limit any of them was accepted under. Orders accepted with no
// limit count in neither: Redis did not count them (a limit set mid-sale
// counts them once the reconciler does, and Redis then refuses, never
// MySQL). Orders written before orders recorded their limit count their
// units, their limit unknown.
type holding struct{ units, loosest int }

// refuses tells whether an order of qty units accepted under limit takes
// a customer holding h past every purchase limit that could have admitted
// it: its own, those its customer's invoiced orders were accepted under,
// and the product's limit now (0: none, and nothing is refused). Redis,
// counting right, admits an order only while the customer's units stay
// within the limit then in force, so the units of orders it admitted stay
// within the limit of the last one admitted, whichever order MySQL sees
// them in: a limit lowered, set or raised after orders were accepted
// refuses none of them. Only a count Redis lost (a failover) gets past
// them all.
func (h holding) refuses(limit, now, qty int) bool {
	return limit > 0 && now > 0 && h.units+qty > max(h.loosest, limit, now)
}

// add counts an invoiced order of qty units accepted under limit.
func (h *holding) add(limit, qty int) {
	if limit > 0 {
		h.units += qty
		h.loosest = max(h.loosest, limit)
	}
}

// limitGuard refuses (order.ReasonPurchaseLimit) an order accepted under
// limit whose units the guard took but that holding.refuses, counting the
// customer's invoiced orders of the SKU, and gives the units back to the
// product; now is the product's limit. It runs with the product row
// locked by the guard, so orders of one SKU pass it one at a time; the
// count is a locking read, which sees every committed order whatever the
// transaction's snapshot. An order accepted with no limit, or a product
// with none, costs no query.
func limitGuard(ctx context.Context, tx *sqlx.Tx, o order.Order, limit, now int) (string, error) {
	if limit <= 0 || now <= 0 {
		return "", nil
	}
	had, err := customerUnits(ctx, tx, o.SKU, []string{o.CustomerID})
	if err != nil {
		return "", err
	}
	if !had[o.CustomerID].refuses(limit, now, o.Qty) {
		return "", nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE products SET sold = sold - ? WHERE sku = ?", o.Qty, o.SKU); err != nil {
		return "", fmt.Errorf("give back units sku=%s: %w", o.SKU, err)
	}
	return order.ReasonPurchaseLimit, nil
}

// customerUnits reads what each of the customers given holds of sku
// (holding) from its invoiced orders, with a locking read (LOCK IN SHARE
// MODE reads the latest committed rows, not the transaction's snapshot).
func customerUnits(ctx context.Context, tx *sqlx.Tx, sku string, customers []string) (map[string]holding, error) {
	query, args, err := sqlx.In(`SELECT customer_id,
			COALESCE(SUM(CASE WHEN max_per_customer = 0 THEN 0 ELSE qty END), 0) AS units,
			COALESCE(MAX(max_per_customer), 0) AS loosest
		FROM orders FORCE INDEX (orders_sku_customer)
		WHERE sku = ? AND customer_id IN (?) AND status = ? GROUP BY customer_id LOCK IN SHARE MODE`,
		sku, customers, string(order.StatusInvoiced))
	if err != nil {
		return nil, fmt.Errorf("build customer units lookup: %w", err)
	}
	var rows []struct {
		Customer string `db:"customer_id"`
		Units    int    `db:"units"`
		Loosest  int    `db:"loosest"`
	}
	if err := tx.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("count customer units sku=%s: %w", sku, err)
	}
	had := make(map[string]holding, len(rows))
	for _, r := range rows {
		had[r.Customer] = holding{units: r.Units, loosest: r.Loosest}
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
