// Package ops holds what operations staff do, shared by opsctl and the
// admin API so both behave the same: load and show stock, and (in other
// files) work the dead-letter queue.
package ops

import (
	"context"
	"errors"
	"fmt"

	"surge/pkg/order"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// ProductStore is the MySQL side of stock operations. *store.Store
// implements it.
type ProductStore interface {
	SetStock(ctx context.Context, sku string, stock int, name *string, priceCents *int64) (store.Product, error)
	Product(ctx context.Context, sku string) (store.Product, error)
}

// StockCache is the Redis side of stock operations. *stock.Stock
// implements it.
type StockCache interface {
	SetStock(ctx context.Context, sku string, total, mysqlSold int) (stock.View, error)
	View(ctx context.Context, sku string) (stock.View, error)
}

// Stock loads and shows stock.
type Stock struct {
	DB    ProductStore
	Redis StockCache
}

// StockReport shows one SKU in MySQL (the truth) and Redis side by side.
type StockReport struct {
	SKU   string         `json:"sku"`
	MySQL *store.Product `json:"mysql"`
	Redis stock.View     `json:"redis"`
	// Consistent is true when Redis holds the same stock and sold as MySQL
	// and avail + reserved + sold == stock.
	Consistent bool `json:"consistent"`
}

// LoadRequest is a stock load: the total stock and optional product fields.
type LoadRequest struct {
	Stock      *int    `json:"stock"`
	Name       *string `json:"name,omitempty"`
	PriceCents *int64  `json:"price_cents,omitempty"`
}

// Validate checks a load request.
func (r LoadRequest) Validate() error {
	if r.Stock == nil {
		return order.Invalid("stock is required")
	}
	if *r.Stock < 0 || *r.Stock > order.MaxStock {
		return order.Invalid("stock must be an integer between 0 and %d", order.MaxStock)
	}
	if r.Name != nil && len(*r.Name) > order.MaxNameLen {
		return order.Invalid("name must be at most %d characters", order.MaxNameLen)
	}
	if r.PriceCents != nil && (*r.PriceCents < 0 || *r.PriceCents > order.MaxPriceCents) {
		return order.Invalid("price_cents must be between 0 and %d", int64(order.MaxPriceCents))
	}
	return nil
}

// Load creates the product when missing, sets its stock in MySQL (refused
// with order.ErrConflict below what is sold), then loads it into Redis.
func (s *Stock) Load(ctx context.Context, sku string, req LoadRequest) (StockReport, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return StockReport{}, err
	}
	if err := req.Validate(); err != nil {
		return StockReport{}, err
	}
	p, err := s.DB.SetStock(ctx, sku, *req.Stock, req.Name, req.PriceCents)
	if err != nil {
		return StockReport{}, fmt.Errorf("set stock in MySQL: %w", err)
	}
	v, err := s.Redis.SetStock(ctx, sku, p.Stock, p.Sold)
	if err != nil {
		return StockReport{}, fmt.Errorf("load stock into Redis (MySQL already holds stock=%d; load again): %w", p.Stock, err)
	}
	return report(sku, &p, v), nil
}

// Show reads a SKU from MySQL and Redis. A SKU unknown to both wraps
// order.ErrUnknownSKU.
func (s *Stock) Show(ctx context.Context, sku string) (StockReport, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return StockReport{}, err
	}
	var pp *store.Product
	p, err := s.DB.Product(ctx, sku)
	switch {
	case err == nil:
		pp = &p
	case !errors.Is(err, order.ErrUnknownSKU):
		return StockReport{}, fmt.Errorf("read product from MySQL: %w", err)
	}
	v, err := s.Redis.View(ctx, sku)
	if err != nil {
		return StockReport{}, fmt.Errorf("read stock from Redis: %w", err)
	}
	if pp == nil && !v.Loaded {
		return StockReport{}, fmt.Errorf("sku %q: %w", sku, order.ErrUnknownSKU)
	}
	return report(sku, pp, v), nil
}

func report(sku string, p *store.Product, v stock.View) StockReport {
	ok := p != nil && v.Loaded && v.Consistent() && v.Stock == p.Stock && v.Sold == p.Sold
	return StockReport{SKU: sku, MySQL: p, Redis: v, Consistent: ok}
}
