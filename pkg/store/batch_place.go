package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// place allocates stock to the open items, SKU by SKU in batch order, and
// writes the orders, the invoices and each SKU's sold counter.
func (b *batch) place(ctx context.Context, tx *sqlx.Tx) error {
	var skus []string
	b.pending(func(_ int, it BatchItem) { skus = append(skus, it.Order.SKU) })
	if len(skus) == 0 {
		return nil
	}
	slices.Sort(skus)
	products, err := lockProducts(ctx, tx, slices.Compact(skus))
	if err != nil {
		return err
	}
	had, err := b.customerUnits(ctx, tx, products)
	if err != nil {
		return err
	}
	taken := make(map[string]int)
	var orders []orderRow
	var invoices []invoiceRow
	b.pending(func(i int, it BatchItem) {
		o := it.Order
		p, ok := products[o.SKU]
		limit := acceptedUnder(o, p.MaxPerCustomer)
		switch {
		case !ok:
			b.settle(i, BatchResult{Err: unknownSKU(o)})
		case p.Sold+taken[o.SKU]+o.Qty > p.Stock:
			b.reject(i, it, order.ReasonCompensated, limit, &orders)
		case had[custKey(o)].refuses(limit, p.MaxPerCustomer, o.Qty):
			b.reject(i, it, order.ReasonPurchaseLimit, limit, &orders)
		default:
			taken[o.SKU] += o.Qty
			h := had[custKey(o)]
			h.add(limit, o.Qty)
			had[custKey(o)] = h
			amount := p.PriceCents * int64(o.Qty)
			b.out[i].Processed = order.Processed{Status: order.StatusInvoiced, AmountCents: amount}
			orders = append(orders, newOrderRow(o, it.Fence, order.StatusInvoiced, "", limit))
			invoices = append(invoices, invoiceRow{OrderID: o.ID, SKU: o.SKU, Qty: o.Qty, AmountCents: amount})
		}
	})
	if err := guardTaken(ctx, tx, taken); err != nil {
		return err
	}
	if err := insertOrders(ctx, tx, orders); err != nil {
		return err
	}
	return insertInvoices(ctx, tx, invoices)
}

// reject records item i, accepted under limit, as rejected for reason.
func (b *batch) reject(i int, it BatchItem, reason string, limit int, orders *[]orderRow) {
	b.out[i].Processed = order.Processed{Status: order.StatusRejected, Reason: reason}
	*orders = append(*orders, newOrderRow(it.Order, it.Fence, order.StatusRejected, reason, limit))
}

// custKey names a customer's units of one SKU.
func custKey(o order.Order) string { return o.SKU + "\x00" + o.CustomerID }

// customerUnits reads, with the products locked, what each pending
// customer holds (holding, keyed by custKey) of every SKU that has a
// purchase limit, for the customers with an order accepted under one.
// SKUs without a limit, and orders accepted with none, cost no query.
func (b *batch) customerUnits(ctx context.Context, tx *sqlx.Tx, products map[string]Product) (map[string]holding, error) {
	bySKU := make(map[string][]string)
	b.pending(func(_ int, it BatchItem) {
		p, ok := products[it.Order.SKU]
		if ok && p.MaxPerCustomer > 0 && acceptedUnder(it.Order, p.MaxPerCustomer) > 0 {
			bySKU[it.Order.SKU] = append(bySKU[it.Order.SKU], it.Order.CustomerID)
		}
	})
	had := make(map[string]holding)
	skus := make([]string, 0, len(bySKU))
	for sku := range bySKU {
		skus = append(skus, sku)
	}
	slices.Sort(skus)
	for _, sku := range skus {
		cs := bySKU[sku]
		slices.Sort(cs)
		units, err := customerUnits(ctx, tx, sku, slices.Compact(cs))
		if err != nil {
			return nil, err
		}
		for c, h := range units {
			had[sku+"\x00"+c] = h
		}
	}
	return had, nil
}

func unknownSKU(o order.Order) error {
	return fmt.Errorf("process order %s: read product sku=%s: %w", o.ID, o.SKU, order.ErrUnknownSKU)
}

// lockProducts reads and row-locks the products of skus (sorted, so that
// concurrent batches lock them in the same order). Missing SKUs are absent
// from the map. FORCE INDEX keeps the optimizer from scanning (and so
// locking) every product of a small table.
func lockProducts(ctx context.Context, tx *sqlx.Tx, skus []string) (map[string]Product, error) {
	query, args, err := sqlx.In("SELECT "+productColumns+" FROM products FORCE INDEX (PRIMARY) WHERE sku IN (?) ORDER BY sku FOR UPDATE", skus)
	if err != nil {
		return nil, fmt.Errorf("build product lookup: %w", err)
	}
	var ps []Product
	if err := tx.SelectContext(ctx, &ps, query, args...); err != nil {
		return nil, fmt.Errorf("lock %d products: %w", len(skus), err)
	}
	byKey := make(map[string]Product, len(ps))
	for _, p := range ps {
		byKey[p.SKU] = p
	}
	return byKey, nil
}

// guardTaken adds each SKU's accepted units to sold through the same guard
// as Process. The rows are locked, so the guard cannot refuse; if it ever
// does, the batch fails rather than invoice past the stock.
func guardTaken(ctx context.Context, tx *sqlx.Tx, taken map[string]int) error {
	skus := make([]string, 0, len(taken))
	for sku := range taken {
		skus = append(skus, sku)
	}
	slices.Sort(skus)
	for _, sku := range skus {
		r, err := tx.ExecContext(ctx, guardSQL, taken[sku], sku, taken[sku])
		if err != nil {
			return fmt.Errorf("guard stock sku=%s: %w", sku, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("guard stock sku=%s: %w", sku, err)
		}
		if n != 1 {
			return fmt.Errorf("guard stock sku=%s refused %d units under lock", sku, taken[sku])
		}
	}
	return nil
}

// insertInvoices writes rows in one multi-row INSERT. Their invoice ids
// are not read back: the worker settles an order on its status alone, and
// whoever shows an invoice (order status, console, replay) reads it from
// MySQL.
func insertInvoices(ctx context.Context, tx *sqlx.Tx, rows []invoiceRow) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.NamedExecContext(ctx, insertInvoiceSQL, rows); err != nil {
		return fmt.Errorf("insert %d invoices: %w", len(rows), err)
	}
	return nil
}
