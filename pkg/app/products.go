package app

import (
	"context"
	"log/slog"
	"time"

	"surge/pkg/admin"
	"surge/pkg/cache"
	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/metrics"
	"surge/pkg/productview"
)

// newProducts builds the product views a gateway serves and a worker
// refreshes, counted in the cache metrics; ttl is how long a view stays
// fresh (0: the cache's default, 30s).
func newProducts(rdb productview.Redis, db productview.Source, ttl time.Duration, log *slog.Logger) *productview.Views {
	return productview.New(rdb, db, cache.Options{TTL: ttl, OnGet: metrics.CacheRead, OnRebuild: metrics.CacheRebuilt}, log)
}

// stockAdmin drops the cached view of a SKU whose stock, name or price an
// operator just set.
type stockAdmin struct {
	httpapi.StockAdmin
	products *productview.Views
	hints    *gateway.SoldOut
	log      *slog.Logger
}

// Load sets the stock, then forgets what this gateway saw of the SKU's
// units (gateway.SoldOut) and invalidates the SKU's cached view.
func (s stockAdmin) Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error) {
	rep, err := s.StockAdmin.Load(ctx, sku, req)
	if err == nil {
		s.hints.Forget(sku)
		if ierr := s.products.Invalidate(ctx, sku); ierr != nil {
			s.log.Warn("product view not invalidated after a stock load", "sku", sku, "err", ierr)
		}
	}
	return rep, err
}

var _ httpapi.StockAdmin = stockAdmin{}
