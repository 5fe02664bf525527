// Package productview serves the product views buyers read (GET
// /v1/products/{sku}) from a stampede-protected Redis cache, and keeps
// them current after sales and stock loads.
package productview

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

	"surge/pkg/cache"
	"surge/pkg/httpapi"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/store"
	"surge/pkg/worker"
)

// Source is the MySQL side of product views. *store.Store implements it.
type Source interface {
	Product(ctx context.Context, sku string) (store.Product, error)
}

// availReader reads a SKU's sellable units from Redis.
type availReader interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}

// Views serves product views from the product cache, and keeps them
// current after sales (the worker's Refresh) and stock loads
// (Invalidate). Name and price come from MySQL through the cache's loader;
// available is Redis's avail, clamped at 0, when the SKU is loaded there
// and MySQL's stock - sold otherwise.
type Views struct {
	cache *cache.Cache
	db    Source
	avail availReader
	log   *slog.Logger

	mu sync.Mutex
	// refreshing holds the SKUs with a refresh running; true means
	// another sale came in meanwhile and one more refresh is due.
	refreshing map[string]bool
	// every is the least time between two refreshes of one SKU.
	every time.Duration
	// quit, closed by Close, ends the waits between refreshes.
	quit     chan struct{}
	quitOnce sync.Once
	wg       sync.WaitGroup
}

// RefreshEvery is the least time between two refreshes of one SKU's view:
// a buyer sees available at most this much older than Redis's, and a hot
// SKU costs the worker at most one refresh per interval whatever its sales
// rate.
const RefreshEvery = 100 * time.Millisecond

// Redis is what product views need from Redis. *redis.ClusterClient
// implements it.
type Redis interface {
	cache.Client
	availReader
}

// New builds the product views on rdb and db. opts are the cache's
// (TTL: how long a view stays fresh, default 30s); its namespace and log
// are the views'.
func New(rdb Redis, db Source, opts cache.Options, log *slog.Logger) *Views {
	p := &Views{db: db, avail: rdb, log: log, refreshing: map[string]bool{}, every: RefreshEvery, quit: make(chan struct{})}
	opts.Namespace, opts.Log = keys.ProductNamespace, log
	p.cache = cache.New(rdb, p.load, opts)
	return p
}

// load builds a product's view from MySQL and Redis: the cache's loader.
func (p *Views) load(ctx context.Context, sku string) ([]byte, error) {
	row, err := p.db.Product(ctx, sku)
	if errors.Is(err, order.ErrUnknownSKU) {
		return nil, fmt.Errorf("%w: %w", cache.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	v := order.ProductView{SKU: row.SKU, Name: row.Name, PriceCents: row.PriceCents, Available: row.Stock - row.Sold}
	if n, ok, err := p.available(ctx, sku); err != nil {
		return nil, err
	} else if ok {
		v.Available = n
	}
	return json.Marshal(v)
}

// available reads sku's avail from Redis; ok is false when not loaded.
func (p *Views) available(ctx context.Context, sku string) (n int, ok bool, err error) {
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
func (p *Views) Product(ctx context.Context, sku string) (order.ProductView, error) {
	raw, err := p.cache.Get(ctx, sku)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return order.ProductView{}, fmt.Errorf("product %s: %w", sku, order.ErrUnknownSKU)
	case errors.Is(err, cache.ErrBusy):
		return order.ProductView{}, fmt.Errorf("product %s: %w: %w", sku, order.ErrUnavailable, err)
	case err != nil:
		return order.ProductView{}, fmt.Errorf("product %s: %w", sku, err)
	}
	var v order.ProductView
	if err := json.Unmarshal(raw, &v); err != nil {
		return order.ProductView{}, fmt.Errorf("decode cached product %s: %w", sku, err)
	}
	return v, nil
}

// Refresh rewrites available in sku's cached view after a sale. It does
// not wait: refreshes of one SKU are coalesced and spaced RefreshEvery
// apart, so a burst of commits on a hot SKU costs one refresh per interval
// (the last of which reads avail after the last sale), instead of one
// compare-and-swap race per order on the same key.
func (p *Views) Refresh(_ context.Context, sku string) {
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

func (p *Views) refreshLoop(sku string) {
	defer p.wg.Done()
	var timer *time.Timer
	for {
		start := time.Now()
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
		if wait := time.Until(start.Add(p.every)); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-p.quit:
				// Shutting down: the view's TTL bounds how stale it stays.
				p.mu.Lock()
				delete(p.refreshing, sku)
				p.mu.Unlock()
				return
			}
		}
	}
}

func (p *Views) refreshOnce(sku string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.cache.Update(ctx, sku, func(old []byte) ([]byte, error) {
		var v order.ProductView
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

// Invalidate drops sku's cached view, after an operator set its stock,
// name or price: the next read rebuilds it.
func (p *Views) Invalidate(ctx context.Context, sku string) error {
	return p.cache.Invalidate(ctx, sku)
}

// Close waits for the refreshes running, drops those waiting for their
// interval, and waits for background rebuilds.
func (p *Views) Close() {
	p.quitOnce.Do(func() { close(p.quit) })
	p.wg.Wait()
	p.cache.Close()
}

var (
	_ httpapi.ProductReader = (*Views)(nil)
	_ worker.Refresher      = (*Views)(nil)
)
