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
	SetStockWith(ctx context.Context, sku string, stock int, name *string, priceCents *int64, maxPerCustomer *int, load store.StockLoader) (store.Product, error)
	Product(ctx context.Context, sku string) (store.Product, error)
}

// StockCache is the Redis side of stock operations. *stock.Stock
// implements it.
type StockCache interface {
	SetStockLimit(ctx context.Context, sku string, total, mysqlSold int, maxPerCustomer *int) (stock.View, error)
	View(ctx context.Context, sku string) (stock.View, error)
}

// Stock loads and shows stock.
type Stock struct {
	DB    ProductStore
	Redis StockCache
}

// Load creates the product when missing and sets its stock and purchase
// limit in MySQL (refused with order.ErrConflict below what MySQL sold)
// and in Redis (refused with a *stock.BelowHeldError, which matches
// order.ErrConflict, below what Redis holds sold or reserved right now).
// Redis is loaded inside the MySQL transaction, the product row locked: a
// refusal from either changes neither. When Redis fails without an answer
// (the load may or may not have run), MySQL keeps what Redis may hold at
// the loosest (held): the higher of the old and new stock, so that it
// holds every unit Redis may sell, and the looser of the old and new
// limits, so that Redis admits no purchase MySQL would not; the error
// says to load again.
func (s *Stock) Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error) {
	if err := order.ValidateSKU(sku); err != nil {
		return admin.StockReport{}, err
	}
	if err := req.Validate(); err != nil {
		return admin.StockReport{}, err
	}
	var v stock.View
	loaded := false
	p, err := s.DB.SetStockWith(ctx, sku, *req.Stock, req.Name, req.PriceCents, req.MaxPerCustomer,
		func(ctx context.Context, prev, next store.Product) (*store.Product, error) {
			var err error
			// Redis takes MySQL's limit, kept or new, so both agree.
			v, err = s.Redis.SetStockLimit(ctx, sku, next.Stock, next.Sold, &next.MaxPerCustomer)
			var below *stock.BelowHeldError
			switch {
			case err == nil:
				loaded = true
				return nil, nil
			case errors.As(err, &below):
				return nil, fmt.Errorf("stock not changed: %w", err)
			}
			h := held(prev, next)
			err = fmt.Errorf("load stock into Redis (MySQL holds stock=%d, max_per_customer=%d; load again): %w", h.Stock, h.MaxPerCustomer, err)
			if h.Stock == prev.Stock && h.MaxPerCustomer == prev.MaxPerCustomer {
				return nil, err // nothing to hold beyond what MySQL had
			}
			return &h, err
		})
	switch {
	case err != nil && loaded:
		return admin.StockReport{}, fmt.Errorf("set stock in MySQL (Redis already holds stock=%d; load again): %w", *req.Stock, err)
	case err != nil:
		return admin.StockReport{}, err
	}
	return report(sku, &p, v), nil
}

// held is the product row that holds whatever Redis may hold after a load
// from prev to next whose outcome is unknown: the higher stock and the
// looser purchase limit (0, none, is the loosest).
func held(prev, next store.Product) store.Product {
	h := next
	h.Stock = max(prev.Stock, next.Stock)
	if prev.MaxPerCustomer == 0 || next.MaxPerCustomer != 0 && prev.MaxPerCustomer > next.MaxPerCustomer {
		h.MaxPerCustomer = prev.MaxPerCustomer
	}
	return h
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
		rep.Consistent = v.Loaded && v.Consistent() && v.Stock == p.Stock && v.Sold == p.Sold &&
			v.MaxPerCustomer == p.MaxPerCustomer
	}
	return rep
}

func redisStock(v stock.View) admin.RedisStock {
	rs := admin.RedisStock{SKU: v.SKU, Loaded: v.Loaded, Stock: v.Stock, Avail: v.Avail, Sold: v.Sold, Reserved: v.Reserved,
		MaxPerCustomer: v.MaxPerCustomer}
	if v.Reservations != nil {
		rs.Reservations = make(map[string]admin.Reservation, len(v.Reservations))
		for id, h := range v.Reservations {
			rs.Reservations[id] = admin.Reservation{Qty: h.Qty, ReservedAt: h.ReservedAt, CustomerID: h.CustomerID}
		}
	}
	return rs
}
