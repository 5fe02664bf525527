package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"surge/pkg/order"
)

// Product is one row of products: what is for sale, and how much of it
// MySQL has already invoiced (Sold).
type Product struct {
	SKU        string `db:"sku" json:"sku"`
	Name       string `db:"name" json:"name"`
	PriceCents int64  `db:"price_cents" json:"price_cents"`
	Stock      int    `db:"stock" json:"stock"`
	Sold       int    `db:"sold" json:"sold"`
	// MaxPerCustomer is the most units one customer may buy (0: no limit).
	MaxPerCustomer int `db:"max_per_customer" json:"max_per_customer"`
}

const productColumns = "sku, name, price_cents, stock, sold, max_per_customer"

// SetStock sets a product's stock, creating the product when it is missing
// (name and price default to empty and 0). A nil name or price keeps the
// current value. The row stays locked for the whole transaction, so a
// concurrent worker cannot sell between the check and the write. Setting
// stock below what is already sold fails with order.ErrConflict.
func (s *Store) SetStock(ctx context.Context, sku string, stock int, name *string, priceCents *int64) (Product, error) {
	return s.SetStockWith(ctx, sku, stock, name, priceCents, nil, nil)
}

// StockLoader puts a stock MySQL is about to commit somewhere else (Redis).
// It runs inside SetStockWith's transaction, with the product row locked
// and updated: prev is the row before, next after. Its error rolls the
// change back, unless it returns a row to keep: MySQL then commits that
// row's stock and purchase limit (next's name and price) and the error is
// still returned. A loader that cannot tell whether the other side took
// next keeps a row that holds whatever either side may hold.
type StockLoader func(ctx context.Context, prev, next Product) (keep *Product, err error)

// SetStockWith is SetStock that also sets the purchase limit per customer
// (nil keeps it, 0 clears it) and runs load before committing, while the
// row is locked, so that no worker sells in MySQL between the two and a
// load refused elsewhere leaves MySQL unchanged. A nil load and limit is
// SetStock. Every load that commits leaves its stock_loads row, naming who
// loaded (WithLoadedBy on ctx), with the stock committed.
func (s *Store) SetStockWith(ctx context.Context, sku string, stock int, name *string, priceCents *int64, maxPerCustomer *int, load StockLoader) (Product, error) {
	if err := validateStock(sku, stock, name, priceCents); err != nil {
		return Product{}, err
	}
	if err := order.ValidateMaxPerCustomer(maxPerCustomer); err != nil {
		return Product{}, err
	}
	var p Product
	var kept error
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var newName string
		var newPrice int64
		if name != nil {
			newName = *name
		}
		if priceCents != nil {
			newPrice = *priceCents
		}
		// Create or lock the row in one statement: a SELECT ... FOR UPDATE
		// of a missing row would only take a gap lock, and two creators
		// would deadlock on their inserts.
		res, err := tx.ExecContext(ctx, `INSERT INTO products (sku, name, price_cents, stock)
			VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE sku = sku`, sku, newName, newPrice, stock)
		if err != nil {
			return fmt.Errorf("ensure product sku=%s: %w", sku, err)
		}
		// 1: inserted, 0: it was there (1 as well with the DSN's
		// clientFoundRows, which surge does not set).
		created, _ := res.RowsAffected()
		err = tx.GetContext(ctx, &p, "SELECT "+productColumns+" FROM products WHERE sku = ? FOR UPDATE", sku)
		if err != nil {
			return fmt.Errorf("lock product sku=%s: %w", sku, err)
		}
		if stock < p.Sold {
			return fmt.Errorf("set stock sku=%s to %d: %w: sold=%d already in MySQL; set it to at least %d", sku, stock, order.ErrConflict, p.Sold, p.Sold)
		}
		prev := p
		p.Stock = stock
		if name != nil {
			p.Name = *name
		}
		if priceCents != nil {
			p.PriceCents = *priceCents
		}
		if maxPerCustomer != nil {
			p.MaxPerCustomer = *maxPerCustomer
		}
		_, err = tx.ExecContext(ctx, "UPDATE products SET stock = ?, name = ?, price_cents = ?, max_per_customer = ?, loaded_at = NOW(3) WHERE sku = ?",
			p.Stock, p.Name, p.PriceCents, p.MaxPerCustomer, sku)
		if err != nil {
			return fmt.Errorf("update product sku=%s: %w", sku, err)
		}
		if load != nil {
			keep, err := load(ctx, prev, p)
			switch {
			case err != nil && keep == nil:
				return err
			case err != nil:
				kept = err
				if err := p.keep(ctx, tx, *keep); err != nil {
					return err
				}
			}
		}
		was := &prev
		if created == 1 {
			was = nil
		}
		return recordStockLoad(ctx, tx, was, p)
	})
	if err != nil {
		return Product{}, err
	}
	return p, kept
}

// keep sets p's stock and purchase limit to k's in tx, when they differ.
func (p *Product) keep(ctx context.Context, tx *sqlx.Tx, k Product) error {
	if k.Stock == p.Stock && k.MaxPerCustomer == p.MaxPerCustomer {
		return nil
	}
	if k.Stock < p.Sold || k.Stock > order.MaxStock || order.ValidateMaxPerCustomer(&k.MaxPerCustomer) != nil {
		return fmt.Errorf("keep stock sku=%s: stock %d, max_per_customer %d out of range (sold %d)", p.SKU, k.Stock, k.MaxPerCustomer, p.Sold)
	}
	p.Stock, p.MaxPerCustomer = k.Stock, k.MaxPerCustomer
	_, err := tx.ExecContext(ctx, "UPDATE products SET stock = ?, max_per_customer = ? WHERE sku = ?", p.Stock, p.MaxPerCustomer, p.SKU)
	if err != nil {
		return fmt.Errorf("keep stock sku=%s: %w", p.SKU, err)
	}
	return nil
}

func validateStock(sku string, stock int, name *string, priceCents *int64) error {
	if err := order.ValidateSKU(sku); err != nil {
		return err
	}
	if stock < 0 || stock > order.MaxStock {
		return order.Invalid("stock must be an integer between 0 and %d", order.MaxStock)
	}
	if name != nil && len([]rune(*name)) > order.MaxNameLen {
		return order.Invalid("name must be at most %d characters", order.MaxNameLen)
	}
	if priceCents != nil && (*priceCents < 0 || *priceCents > order.MaxPriceCents) {
		return order.Invalid("price_cents must be between 0 and %d", int64(order.MaxPriceCents))
	}
	return nil
}

// Product reads one product; order.ErrUnknownSKU when there is none.
func (s *Store) Product(ctx context.Context, sku string) (Product, error) {
	var p Product
	err := s.db.GetContext(ctx, &p, "SELECT "+productColumns+" FROM products WHERE sku = ?", sku)
	if errors.Is(err, sql.ErrNoRows) {
		return Product{}, fmt.Errorf("read product sku=%s: %w", sku, order.ErrUnknownSKU)
	}
	if err != nil {
		return Product{}, fmt.Errorf("read product sku=%s: %w", sku, err)
	}
	return p, nil
}

// ListProducts returns every product ordered by SKU.
func (s *Store) ListProducts(ctx context.Context) ([]Product, error) {
	ps := []Product{}
	if err := s.db.SelectContext(ctx, &ps, "SELECT "+productColumns+" FROM products ORDER BY sku"); err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return ps, nil
}
