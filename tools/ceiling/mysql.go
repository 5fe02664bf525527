package ceiling

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MySQLOptions tune the insert ceiling. The zero value means the defaults.
type MySQLOptions struct {
	// Table is created LIKE invoices (same columns and indexes) and
	// dropped afterwards. Required: use a name no one else uses.
	Table string
	// Workers insert concurrently. Default 4.
	Workers int
	// Batch is the rows per INSERT, each INSERT its own transaction.
	// Default 500.
	Batch int
	// Duration of the measurement. Default 3s.
	Duration time.Duration
}

func (o *MySQLOptions) setDefaults() {
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Batch == 0 {
		o.Batch = 500
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
}

func (o MySQLOptions) validate() error {
	if o.Table == "" || strings.ContainsAny(o.Table, "`") {
		return fmt.Errorf("mysql ceiling: a plain table name is required, got %q", o.Table)
	}
	return nil
}

// MySQLBatchInsert measures multi-row invoice inserts, one transaction per
// batch, in rows per second.
func MySQLBatchInsert(ctx context.Context, db *sql.DB, opts MySQLOptions) (Result, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	table := "`" + opts.Table + "`"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" LIKE invoices"); err != nil {
		return Result{}, fmt.Errorf("mysql ceiling: create %s: %w", opts.Table, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(cctx, "DROP TABLE "+table)
	}()
	query := "INSERT INTO " + table + " (order_id, sku, qty, amount_cents) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, 'ceiling', 1, 1999),", opts.Batch), ",")
	res, err := drive(ctx, "mysql_batch_insert", opts.Workers, opts.Duration, func(ctx context.Context, w int, i int64) (int, error) {
		args := make([]any, opts.Batch)
		prefix := "w" + strconv.Itoa(w) + "-" + strconv.FormatInt(i, 10) + "-"
		for r := range args {
			args[r] = prefix + strconv.Itoa(r)
		}
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			return 0, fmt.Errorf("insert batch: %w", err)
		}
		return opts.Batch, nil
	})
	res.Setup = fmt.Sprintf("INSERT of %d invoice rows per transaction, %d connections", opts.Batch, opts.Workers)
	return res, err
}
