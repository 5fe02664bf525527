package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// orderRow is one row of orders as written.
type orderRow struct {
	OrderID    string         `db:"order_id"`
	SKU        string         `db:"sku"`
	Qty        int            `db:"qty"`
	CustomerID string         `db:"customer_id"`
	Status     string         `db:"status"`
	Reason     sql.NullString `db:"reason"`
	Fence      int64          `db:"fence"`
	// MaxPerCustomer is the purchase limit the order was accepted under
	// (acceptedUnder; 0: none).
	MaxPerCustomer int `db:"max_per_customer"`
}

func newOrderRow(o order.Order, fence int64, st order.Status, reason string, limit int) orderRow {
	return orderRow{
		OrderID: o.ID, SKU: o.SKU, Qty: o.Qty, CustomerID: o.CustomerID, Status: string(st),
		Reason: sql.NullString{String: reason, Valid: reason != ""}, Fence: fence, MaxPerCustomer: limit,
	}
}

// invoiceRow is one row of invoices as written.
type invoiceRow struct {
	OrderID     string `db:"order_id"`
	SKU         string `db:"sku"`
	Qty         int    `db:"qty"`
	AmountCents int64  `db:"amount_cents"`
}

const insertInvoiceSQL = `INSERT INTO invoices (order_id, sku, qty, amount_cents)
	VALUES (:order_id, :sku, :qty, :amount_cents)`

// insertOrders writes rows in one multi-row INSERT.
func insertOrders(ctx context.Context, tx *sqlx.Tx, rows []orderRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.NamedExecContext(ctx, `INSERT INTO orders (order_id, sku, qty, customer_id, status, reason, fence, max_per_customer)
		VALUES (:order_id, :sku, :qty, :customer_id, :status, :reason, :fence, :max_per_customer)`, rows)
	if err != nil {
		return fmt.Errorf("insert %d orders: %w", len(rows), err)
	}
	return nil
}

type fenceRow struct {
	OrderID string `db:"order_id"`
	Fence   int64  `db:"fence"`
}

// recordFences raises each order's recorded fencing token to at least the
// given one and returns the tokens now recorded, with the rows locked until
// the transaction ends. A recorded token above the caller's means a newer
// lock holder got there first. Upserting before reading (rather than
// SELECT ... FOR UPDATE first) locks a missing row by inserting it, where a
// locking read would take a gap lock and two workers would deadlock; rows
// go in order_id order so concurrent batches lock them in the same order.
func recordFences(ctx context.Context, tx *sqlx.Tx, fences map[string]int64) (map[string]int64, error) {
	recorded := make(map[string]int64, len(fences))
	if len(fences) == 0 {
		return recorded, nil
	}
	ids, err := raiseFences(ctx, tx, fences)
	if err != nil {
		return nil, err
	}
	// FORCE INDEX: on a small table the optimizer scans it whole for an IN
	// list, and a locking scan locks every row, deadlocking batches that
	// share no order.
	query, args, err := sqlx.In("SELECT order_id, fence FROM order_fences FORCE INDEX (PRIMARY) WHERE order_id IN (?) FOR UPDATE", ids)
	if err != nil {
		return nil, fmt.Errorf("build fence lookup: %w", err)
	}
	var got []fenceRow
	if err := tx.SelectContext(ctx, &got, query, args...); err != nil {
		return nil, fmt.Errorf("read fences of %d orders: %w", len(ids), err)
	}
	for _, r := range got {
		recorded[r.OrderID] = r.Fence
	}
	return recorded, nil
}

// raiseFences raises each order's recorded fencing token to at least the
// given one, in one statement, and returns the order ids sorted. It leaves
// every fence row locked (exclusive) until the transaction ends, so a read
// later in the transaction sees the recorded token no other transaction
// can change meanwhile.
func raiseFences(ctx context.Context, tx *sqlx.Tx, fences map[string]int64) ([]string, error) {
	rows := make([]fenceRow, 0, len(fences))
	ids := make([]string, 0, len(fences))
	for id, f := range fences {
		rows = append(rows, fenceRow{OrderID: id, Fence: f})
		ids = append(ids, id)
	}
	slices.SortFunc(rows, func(a, b fenceRow) int { return cmp.Compare(a.OrderID, b.OrderID) })
	slices.Sort(ids)
	_, err := tx.NamedExecContext(ctx, `INSERT INTO order_fences (order_id, fence) VALUES (:order_id, :fence)
		ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))`, rows)
	if err != nil {
		return nil, fmt.Errorf("record fences of %d orders: %w", len(rows), err)
	}
	return ids, nil
}
