package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/admin"
	"surge/pkg/cache"
	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/keys"
	"surge/pkg/metrics"
	"surge/pkg/order"
	"surge/pkg/store"
	"surge/pkg/worker"
)

// productSource is the MySQL side of product views. *store.Store
// implements it.
type productSource interface {
	Product(ctx context.Context, sku string) (store.Product, error)
}

// availReader reads a SKU's sellable units from Redis.
// *redis.ClusterClient implements it.
type availReader interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}

// products serves GET /v1/products/{sku} from the product cache, and
// keeps the cached views current after sales (worker) and stock loads
// (admin API). Name and price come from MySQL through the cache's loader;
// available is Redis's avail, clamped at 0, when the SKU is loaded there
// and MySQL's stock - sold otherwise.
type products struct {
	cache *cache.Cache
	db    productSource
	avail availReader
	log   *slog.Logger

	mu sync.Mutex
	// refreshing holds the SKUs with a refresh running; true means
	// another sale came in meanwhile and one more refresh is due.
	refreshing map[string]bool
	wg         sync.WaitGroup
}

// newProducts builds the product views on rdb and db; ttl is how long a
// view stays fresh (0: the cache's default, 30s).
func newProducts(rdb productRedis, db productSource, ttl time.Duration, log *slog.Logger) *products {
	return newProductsWith(rdb, db, cache.Options{TTL: ttl}, log)
}

// productRedis is what product views need from Redis.
type productRedis interface {
	cache.Client
	availReader
}

// newProductsWith is newProducts with every cache option.
func newProductsWith(rdb productRedis, db productSource, opts cache.Options, log *slog.Logger) *products {
	p := &products{db: db, avail: rdb, log: log, refreshing: map[string]bool{}}
	opts.Namespace, opts.Log = keys.ProductNamespace, log
	if opts.OnGet == nil {
		opts.OnGet = metrics.CacheRead
	}
	p.cache = cache.New(rdb, countedLoader(p.load), opts)
	return p
}

// load builds a product's view from MySQL and Redis: the cache's loader.
func (p *products) load(ctx context.Context, sku string) ([]byte, error) {
	row, err := p.db.Product(ctx, sku)
	if errors.Is(err, order.ErrUnknownSKU) {
		return nil, fmt.Errorf("%w: %w", cache.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	v := httpapi.ProductView{SKU: row.SKU, Name: row.Name, PriceCents: row.PriceCents, Available: row.Stock - row.Sold}
	if n, ok, err := p.available(ctx, sku); err != nil {
		return nil, err
	} else if ok {
		v.Available = n
	}
	return json.Marshal(v)
}

// available reads sku's avail from Redis; ok is false when not loaded.
func (p *products) available(ctx context.Context, sku string) (n int, ok bool, err error) {
	s, err := p.avail.Get(ctx, keys.Avail(sku)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err == nil {
		n, err = strconv.Atoi(s)
	}
	if err != nil {
		return 0, false, fmt.Errorf("read avail sku=%s: %w", sku, err)
	}
	return max(n, 0), true, nil
}

// Product answers a product view.
func (p *products) Product(ctx context.Context, sku string) (httpapi.ProductView, error) {
	raw, err := p.cache.Get(ctx, sku)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return httpapi.ProductView{}, fmt.Errorf("product %s: %w", sku, order.ErrUnknownSKU)
	case errors.Is(err, cache.ErrBusy):
		return httpapi.ProductView{}, fmt.Errorf("product %s: %w: %w", sku, order.ErrUnavailable, err)
	case err != nil:
		return httpapi.ProductView{}, fmt.Errorf("product %s: %w", sku, err)
	}
	var v httpapi.ProductView
	if err := json.Unmarshal(raw, &v); err != nil {
		return httpapi.ProductView{}, fmt.Errorf("decode cached product %s: %w", sku, err)
	}
	return v, nil
}

// Refresh rewrites available in sku's cached view after a sale. It does
// not wait: refreshes of one SKU are coalesced, so a burst of commits on a
// hot SKU costs one refresh running plus at most one more after it (which
// reads avail after the last of them), instead of one compare-and-swap
// race per order on the same key.
func (p *products) Refresh(_ context.Context, sku string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, running := p.refreshing[sku]; running {
		p.refreshing[sku] = true // run once more when the current one ends
		return
	}
	p.refreshing[sku] = false
	p.wg.Add(1)
	go p.refreshLoop(sku)
}

func (p *products) refreshLoop(sku string) {
	defer p.wg.Done()
	for {
		p.refreshOnce(sku)
		p.mu.Lock()
		again := p.refreshing[sku]
		if !again {
			delete(p.refreshing, sku)
			p.mu.Unlock()
			return
		}
		p.refreshing[sku] = false
		p.mu.Unlock()
	}
}

func (p *products) refreshOnce(sku string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.cache.Update(ctx, sku, func(old []byte) ([]byte, error) {
		var v httpapi.ProductView
		if err := json.Unmarshal(old, &v); err != nil {
			return nil, fmt.Errorf("decode cached product: %w", err)
		}
		n, ok, err := p.available(ctx, sku)
		if err != nil || !ok {
			return old, err
		}
		v.Available = n
		return json.Marshal(v)
	})
	if err != nil {
		p.log.Warn("product view not refreshed", "sku", sku, "err", err)
	}
}

// Close waits for background refreshes and rebuilds.
func (p *products) Close() {
	p.wg.Wait()
	p.cache.Close()
}

// stockAdmin drops the cached view of a SKU whose stock, name or price an
// operator just set.
type stockAdmin struct {
	httpapi.StockAdmin
	products *products
	hints    *gateway.SoldOutHints
}

// Load sets the stock, then forgets this gateway's sold-out hint and
// invalidates the SKU's cached view.
func (s stockAdmin) Load(ctx context.Context, sku string, req admin.LoadRequest) (admin.StockReport, error) {
	rep, err := s.StockAdmin.Load(ctx, sku, req)
	if err == nil {
		s.hints.Forget(sku)
		if ierr := s.products.cache.Invalidate(ctx, sku); ierr != nil {
			s.products.log.Warn("product view not invalidated after a stock load", "sku", sku, "err", ierr)
		}
	}
	return rep, err
}

var (
	_ httpapi.ProductReader = (*products)(nil)
	_ worker.Refresher      = (*products)(nil)
	_ httpapi.StockAdmin    = stockAdmin{}
)
