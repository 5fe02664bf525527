package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"surge/pkg/admin"
)

// recordStockLoad writes the audit row of a load in tx, naming who loads
// as ctx says (admin.WithLoadedBy): prev is the row before (nil when the
// load created it), next after.
func recordStockLoad(ctx context.Context, tx *sqlx.Tx, prev *Product, next Product) error {
	by := admin.LoadedByFrom(ctx)
	var before sql.NullInt64
	if prev != nil {
		before = sql.NullInt64{Int64: int64(prev.Stock), Valid: true}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO stock_loads (sku, stock_before, stock_after, sold, actor, via)
		VALUES (?, ?, ?, ?, ?, ?)`, next.SKU, before, next.Stock, next.Sold, by.Actor, by.Via)
	if err != nil {
		return fmt.Errorf("record stock load sku=%s: %w", next.SKU, err)
	}
	return nil
}

// StockLoad is one audited stock load.
type StockLoad struct {
	ID          int64         `db:"id" json:"id"`
	SKU         string        `db:"sku" json:"sku"`
	StockBefore sql.NullInt64 `db:"stock_before" json:"-"`
	StockAfter  int           `db:"stock_after" json:"stock_after"`
	Sold        int           `db:"sold" json:"sold"`
	Actor       string        `db:"actor" json:"actor"`
	Via         string        `db:"via" json:"via"`
	At          time.Time     `db:"at" json:"at"`
}

// Created reports whether the load created the product.
func (l StockLoad) Created() bool { return !l.StockBefore.Valid }

// StockLoads returns sku's last limit loads, newest first.
func (s *Store) StockLoads(ctx context.Context, sku string, limit int) ([]StockLoad, error) {
	out := []StockLoad{}
	err := s.db.SelectContext(ctx, &out, `SELECT id, sku, stock_before, stock_after, sold, actor, via, at
		FROM stock_loads WHERE sku = ? ORDER BY id DESC LIMIT ?`, sku, limit)
	if err != nil {
		return nil, fmt.Errorf("read stock loads sku=%s: %w", sku, err)
	}
	return out, nil
}
