package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
	"surge/pkg/store"
)

// StoreLedger is the Ledger on surge's MySQL store.
type StoreLedger struct {
	Store *store.Store
}

var _ Ledger = StoreLedger{}

// SKUs lists every product's SKU.
func (l StoreLedger) SKUs(ctx context.Context) ([]string, error) {
	ps, err := l.Store.ListProducts(ctx)
	if err != nil {
		return nil, err
	}
	skus := make([]string, len(ps))
	for i, p := range ps {
		skus[i] = p.SKU
	}
	return skus, nil
}

// RecordRepair logs a repair in reconcile_repairs, under the operator ctx
// names (WithOperator), or as the schedule's.
func (l StoreLedger) RecordRepair(ctx context.Context, sku string, found, changed any, dryRun bool) error {
	return l.Store.RecordRepairBy(ctx, sku, found, changed, dryRun, Operator(ctx))
}

// Snapshot reads the product, the orders among ids, the orders invoiced
// within lookback and the count of compensated ones in one read-only
// REPEATABLE READ transaction, so that products.sold and the orders agree
// with each other.
func (l StoreLedger) Snapshot(ctx context.Context, sku string, ids []string, lookback time.Duration) (Truth, error) {
	tx, err := l.Store.DB().BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return Truth{}, fmt.Errorf("snapshot sku=%s: begin: %w", sku, err)
	}
	defer func() { _ = tx.Rollback() }()
	t := Truth{Orders: map[string]OrderFact{}}
	err = tx.QueryRowxContext(ctx, "SELECT stock, sold, max_per_customer FROM products WHERE sku = ?", sku).Scan(&t.Stock, &t.Sold, &t.MaxPerCustomer)
	if errors.Is(err, sql.ErrNoRows) {
		return Truth{}, fmt.Errorf("snapshot sku=%s: %w", sku, order.ErrUnknownSKU)
	}
	if err != nil {
		return Truth{}, fmt.Errorf("snapshot sku=%s: read product: %w", sku, err)
	}
	if err := ordersByID(ctx, tx, sku, ids, t.Orders); err != nil {
		return Truth{}, err
	}
	err = tx.SelectContext(ctx, &t.Invoiced, `SELECT order_id, status, qty FROM orders
		WHERE sku = ? AND status = ? AND created_at >= NOW(3) - INTERVAL ? MICROSECOND`,
		sku, string(order.StatusInvoiced), lookback.Microseconds())
	if err != nil {
		return Truth{}, fmt.Errorf("snapshot sku=%s: read recent invoiced orders: %w", sku, err)
	}
	err = tx.GetContext(ctx, &t.Compensated, `SELECT COUNT(*) FROM orders
		WHERE sku = ? AND created_at >= NOW(3) - INTERVAL ? MICROSECOND AND status = ? AND reason IN (?, ?)`,
		sku, lookback.Microseconds(), string(order.StatusRejected), order.ReasonCompensated, order.ReasonPurchaseLimit)
	if err != nil {
		return Truth{}, fmt.Errorf("snapshot sku=%s: count compensated orders: %w", sku, err)
	}
	if t.MaxPerCustomer > 0 {
		if t.CustomerUnits, err = customerUnits(ctx, tx, sku); err != nil {
			return Truth{}, err
		}
	}
	return t, nil
}

// customerUnits sums the units invoiced per customer of sku.
func customerUnits(ctx context.Context, tx *sqlx.Tx, sku string) (map[string]int, error) {
	var rows []struct {
		Customer string `db:"customer_id"`
		Units    int    `db:"units"`
	}
	err := tx.SelectContext(ctx, &rows, `SELECT customer_id, SUM(qty) AS units FROM orders
		WHERE sku = ? AND status = ? GROUP BY customer_id`, sku, string(order.StatusInvoiced))
	if err != nil {
		return nil, fmt.Errorf("snapshot sku=%s: sum units per customer: %w", sku, err)
	}
	units := make(map[string]int, len(rows))
	for _, r := range rows {
		units[r.Customer] = r.Units
	}
	return units, nil
}

// ordersByID adds to into the orders of sku among ids, in chunks that keep
// each IN list short.
func ordersByID(ctx context.Context, tx *sqlx.Tx, sku string, ids []string, into map[string]OrderFact) error {
	const chunk = 500
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		q, args, err := sqlx.In("SELECT order_id, status, qty FROM orders WHERE sku = ? AND order_id IN (?)", sku, part)
		if err != nil {
			return fmt.Errorf("snapshot sku=%s: build order lookup: %w", sku, err)
		}
		var facts []OrderFact
		if err := tx.SelectContext(ctx, &facts, q, args...); err != nil {
			return fmt.Errorf("snapshot sku=%s: read %d orders: %w", sku, len(part), err)
		}
		for _, f := range facts {
			into[f.ID] = f
		}
	}
	return nil
}
