package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// LoadedProduct is a product with when its stock was last loaded.
type LoadedProduct struct {
	Product
	LoadedAt time.Time `db:"loaded_at" json:"loaded_at"`
}

// RecentProducts returns up to limit products whose SKU or name contains
// search (every product for ""), the most recently loaded first.
func (s *Store) RecentProducts(ctx context.Context, search string, limit int) ([]LoadedProduct, error) {
	ps := []LoadedProduct{}
	like := "%" + escapeLike(search) + "%"
	err := s.db.SelectContext(ctx, &ps, "SELECT "+productColumns+`, COALESCE(loaded_at, created_at) AS loaded_at
		FROM products WHERE sku LIKE ? OR name LIKE ? ORDER BY COALESCE(loaded_at, created_at) DESC, sku LIMIT ?`,
		like, like, limit)
	if err != nil {
		return nil, fmt.Errorf("list recent products: %w", err)
	}
	return ps, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// OrderRow is an order as listed: MySQL's row with its invoice, and when
// each was written.
type OrderRow struct {
	OrderRecord
	CreatedAt  time.Time  `db:"created_at"`
	InvoicedAt *time.Time `db:"invoiced_at"`
}

const orderRowSelect = `SELECT o.order_id, o.sku, o.customer_id, o.status, COALESCE(o.reason, '') AS reason,
	o.qty, COALESCE(i.invoice_id, 0) AS invoice_id, COALESCE(i.amount_cents, 0) AS amount_cents,
	o.created_at, i.created_at AS invoiced_at
	FROM orders o LEFT JOIN invoices i ON i.order_id = o.order_id`

// RecentOrders returns sku's last limit orders in MySQL, newest first.
func (s *Store) RecentOrders(ctx context.Context, sku string, limit int) ([]OrderRow, error) {
	rows := []OrderRow{}
	err := s.db.SelectContext(ctx, &rows, orderRowSelect+" WHERE o.sku = ? ORDER BY o.created_at DESC LIMIT ?", sku, limit)
	if err != nil {
		return nil, fmt.Errorf("recent orders sku=%s: %w", sku, err)
	}
	return rows, nil
}

// OrderRows reads the orders among ids that MySQL has, by id.
func (s *Store) OrderRows(ctx context.Context, ids []string) (map[string]OrderRow, error) {
	out := map[string]OrderRow{}
	if len(ids) == 0 {
		return out, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	var rows []OrderRow
	if err := s.db.SelectContext(ctx, &rows, orderRowSelect+" WHERE o.order_id IN ("+marks+")", args...); err != nil {
		return nil, fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// AuditQuery pages an audit log, newest first: rows with an id below
// Before (0: from the newest), at most Limit of them, optionally only
// those of one order or SKU.
type AuditQuery struct {
	Before  int64
	Limit   int
	OrderID string
	SKU     string
}

// ReplayEntry is one row of dlq_replays.
type ReplayEntry struct {
	ID int64 `db:"id"`
	ReplayRecord
}

// Replays pages the dead-letter audit log (dlq_replays); SKU is not a
// column of it and is ignored.
func (s *Store) Replays(ctx context.Context, q AuditQuery) ([]ReplayEntry, error) {
	where, args := []string{"1=1"}, []any{}
	if q.Before > 0 {
		where, args = append(where, "id < ?"), append(args, q.Before)
	}
	if q.OrderID != "" {
		where, args = append(where, "order_id = ?"), append(args, q.OrderID)
	}
	rows := []ReplayEntry{}
	err := s.db.SelectContext(ctx, &rows, `SELECT id, dead_letter_id, order_id, actor, outcome, at FROM dlq_replays
		WHERE `+strings.Join(where, " AND ")+" ORDER BY id DESC LIMIT ?", append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("read dead-letter audit log: %w", err)
	}
	return rows, nil
}

// RepairEntry is one row of reconcile_repairs: what the reconciler found
// and changed for a SKU, as JSON, and who asked ("" is the schedule).
type RepairEntry struct {
	ID      int64           `db:"id"`
	SKU     string          `db:"sku"`
	Found   json.RawMessage `db:"found"`
	Changed json.RawMessage `db:"changed"`
	DryRun  bool            `db:"dry_run"`
	Actor   string          `db:"actor"`
	At      time.Time       `db:"at"`
}

// Repairs pages the reconciler's log (reconcile_repairs); OrderID is
// ignored.
func (s *Store) Repairs(ctx context.Context, q AuditQuery) ([]RepairEntry, error) {
	where, args := []string{"1=1"}, []any{}
	if q.Before > 0 {
		where, args = append(where, "id < ?"), append(args, q.Before)
	}
	if q.SKU != "" {
		where, args = append(where, "sku = ?"), append(args, q.SKU)
	}
	rows := []RepairEntry{}
	err := s.db.SelectContext(ctx, &rows, `SELECT id, sku, found, changed, dry_run, actor, at FROM reconcile_repairs
		WHERE `+strings.Join(where, " AND ")+" ORDER BY id DESC LIMIT ?", append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("read reconcile log: %w", err)
	}
	return rows, nil
}
