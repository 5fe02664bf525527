package browser

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// checkoutDir is the reference checkout, served as it is.
const checkoutDir = "../../examples/checkout"

const adminToken = "test-token"

// pipeline is a gateway and a worker pool on the real engines, on their
// own queue names and database, and the origin the gateway's CORS allows.
type pipeline struct {
	API   string // the gateway's base URL (public listener)
	Admin string // the gateway's admin listener (admin API, console)
	Page  string // the checkout, served from an allowed origin
	DB    *store.Store
	Stock *stock.Stock
	// StartWorker starts the worker pool (startPipeline does, unless
	// told not to).
	StartWorker func()
	// Cfg is the engines' configuration (queue names, database).
	Cfg     config.Common
	Gateway *app.Gateway
}

// servePage serves the checkout from a new origin (another port) until
// cleanup and returns its base URL.
func servePage(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(checkoutDir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// commonConfig returns configuration on fresh names, with the database
// migrated (apptest.Common).
func commonConfig(t *testing.T) config.Common { return apptest.Common(t) }

// options shape a pipeline: Proxy puts the gateway's RabbitMQ connection
// through a proxy the test can cut or stall (the worker's does not go
// through it); NoWorker leaves the worker to StartWorker; Gateway tunes
// the gateway's configuration.
type options struct {
	Proxy    bool
	NoWorker bool
	Gateway  func(*app.GatewayConfig)
}

// startPipeline serves the checkout, then runs a gateway whose CORS
// allows that origin, and a worker pool.
func startPipeline(t *testing.T, o options) (*pipeline, *testenv.Proxy) {
	t.Helper()
	page := servePage(t)
	c := commonConfig(t)
	cfg := apptest.GatewayConfig(t, c, adminToken)
	cfg.CORSOrigins = []string{page} // SURGE_CORS_ORIGINS
	var proxy *testenv.Proxy
	if o.Proxy {
		proxy = testenv.NewProxy(t, "127.0.0.1:5672")
		cfg.AMQP.URL = strings.Replace(c.AMQP.URL, "127.0.0.1:5672", proxy.Addr(), 1)
	}
	if o.Gateway != nil {
		o.Gateway(&cfg)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	api, g := apptest.Gateway(t, cfg, log)
	p := &pipeline{API: api, Admin: apptest.AdminURL(g), Page: page, Stock: g.Stock}
	p.Cfg, p.Gateway = c, g
	p.StartWorker = func() { apptest.Worker(t, apptest.WorkerConfig(t, c), log) }
	if !o.NoWorker {
		p.StartWorker()
	}
	db, err := store.Open(context.Background(), c.MySQL.DSN, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p.DB = db
	return p, proxy
}

// loadStock creates a product with n units through the admin API and
// removes its Redis keys at cleanup.
func (p *pipeline) loadStock(t *testing.T, sku string, n int) {
	t.Helper()
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	apptest.PutStock(t, http.DefaultClient, p.Admin, adminToken, sku, n, "Limited sneaker", 12900)
}

// checkoutURL is the page at base for customer, against the gateway;
// extra adds query parameters (deadline, qty).
func (p *pipeline) checkoutURL(base, sku, customer string, extra url.Values) string {
	q := url.Values{"api": {p.API}, "sku": {sku}, "customer": {customer}}
	for k, v := range extra {
		q[k] = v
	}
	return base + "/index.html?" + q.Encode()
}

// placed is one order MySQL holds.
type placed struct {
	ID       string `db:"order_id"`
	Customer string `db:"customer_id"`
	Status   string `db:"status"`
	Invoice  int64  `db:"invoice_id"`
}

// orders returns the orders MySQL holds for sku.
func (p *pipeline) orders(t *testing.T, sku string) []placed {
	t.Helper()
	var out []placed
	err := p.DB.DB().SelectContext(context.Background(), &out, `SELECT o.order_id, o.customer_id, o.status,
		COALESCE(i.invoice_id, 0) AS invoice_id FROM orders o LEFT JOIN invoices i ON i.order_id = o.order_id
		WHERE o.sku = ? ORDER BY o.order_id`, sku)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkBooks waits until Redis has settled every reservation of sku and
// checks that Redis and MySQL agree on sold units: sold in both, and the
// rest available.
func (p *pipeline) checkBooks(t *testing.T, sku string, stockN, sold int) {
	t.Helper()
	ctx := context.Background()
	var v stock.View
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		v, err = p.Stock.View(ctx, sku)
		if err == nil && v.Reserved == 0 && v.Sold == sold {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis for %s: %+v (err %v), want %d sold and nothing reserved", sku, v, err, sold)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v.Avail != stockN-sold || v.Stock != stockN {
		t.Errorf("Redis for %s: %+v, want stock %d and %d available", sku, v, stockN, stockN-sold)
	}
	invoices, err := p.DB.InvoiceCount(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	units, err := p.DB.SoldInvoiced(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := p.DB.Product(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if invoices != sold || units != sold || prod.Sold != sold {
		t.Errorf("MySQL for %s: %d invoices of %d units, products.sold %d; want %d", sku, invoices, units, prod.Sold, sold)
	}
}
