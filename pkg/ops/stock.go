// Package ops holds what operations staff do, shared by opsctl and the
// admin API so both behave the same: load and show stock, and (in other
// files) work the dead-letter queue.
package ops

import (
	"context"
	"errors"
	"fmt"

	"surge/pkg/admin"
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

// Load creates the product when missing, sets its stock in MySQL (refused
// with order.ErrConflict below what is sold), then loads it into Redis.
func (s *Stock) Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return admin.StockReport{}, err
	}
	if err := req.Validate(); err != nil {
		return admin.StockReport{}, err
	}
	p, err := s.DB.SetStock(ctx, sku, *req.Stock, req.Name, req.PriceCents)
	if err != nil {
		return admin.StockReport{}, fmt.Errorf("set stock in MySQL: %w", err)
	}
	v, err := s.Redis.SetStock(ctx, sku, p.Stock, p.Sold)
	if err != nil {
		return admin.StockReport{}, fmt.Errorf("load stock into Redis (MySQL already holds stock=%d; load again): %w", p.Stock, err)
	}
	return report(sku, &p, v), nil
}

// Show reads a SKU from MySQL and Redis. A SKU unknown to both wraps
// order.ErrUnknownSKU.
func (s *Stock) Show(ctx context.Context, sku string) (admin.StockReport, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return admin.StockReport{}, err
	}
	var pp *store.Product
	p, err := s.DB.Product(ctx, sku)
	switch {
	case err == nil:
		pp = &p
	case !errors.Is(err, order.ErrUnknownSKU):
		return admin.StockReport{}, fmt.Errorf("read product from MySQL: %w", err)
	}
	v, err := s.Redis.View(ctx, sku)
	if err != nil {
		return admin.StockReport{}, fmt.Errorf("read stock from Redis: %w", err)
	}
	if pp == nil && !v.Loaded {
		return admin.StockReport{}, fmt.Errorf("sku %q: %w", sku, order.ErrUnknownSKU)
	}
	return report(sku, pp, v), nil
}

func report(sku string, p *store.Product, v stock.View) admin.StockReport {
	rep := admin.StockReport{SKU: sku, Redis: redisStock(v)}
	if p != nil {
		mysql := admin.Product(*p)
		rep.MySQL = &mysql
		rep.Consistent = v.Loaded && v.Consistent() && v.Stock == p.Stock && v.Sold == p.Sold
	}
	return rep
}

func redisStock(v stock.View) admin.RedisStock {
	rs := admin.RedisStock{SKU: v.SKU, Loaded: v.Loaded, Stock: v.Stock, Avail: v.Avail, Sold: v.Sold, Reserved: v.Reserved}
	if v.Reservations != nil {
		rs.Reservations = make(map[string]admin.Reservation, len(v.Reservations))
		for id, h := range v.Reservations {
			rs.Reservations[id] = admin.Reservation{Qty: h.Qty, ReservedAt: h.ReservedAt, CustomerID: h.CustomerID}
		}
	}
	return rs
}
