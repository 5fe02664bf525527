package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// pipeline is a gateway and a worker pool wired to the real engines, on
// their own exchange, queues and database.
type pipeline struct {
	// URL is the public listener, Admin the admin one.
	URL   string
	Admin string
	Token string
	DB    *store.Store
	Stock *stock.Stock
	Cfg   config.Common
	stopW func()
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, nil))
}

// commonConfig returns configuration on fresh names, with the database
// migrated (apptest.Common).
func commonConfig(t *testing.T) config.Common { return apptest.Common(t) }

// startGateway runs a gateway with its production defaults on c until
// cleanup and returns its URL.
func startGateway(t *testing.T, c config.Common) (string, *app.Gateway) {
	t.Helper()
	return startGatewayConfig(t, apptest.GatewayConfig(t, c, "test-token"))
}

// startGatewayConfig runs a gateway with cfg until cleanup.
func startGatewayConfig(t *testing.T, cfg app.GatewayConfig) (string, *app.Gateway) {
	t.Helper()
	return apptest.Gateway(t, cfg, quietLog())
}

// workerConfig is the production defaults (batching, locks) on c, with no
// metrics listener.
func workerConfig(t *testing.T, c config.Common) app.WorkerConfig {
	t.Helper()
	return apptest.WorkerConfig(t, c)
}

// startWorker runs a worker pool on c; the returned func stops it and
// waits for its shutdown (also done at cleanup).
func startWorker(t *testing.T, c config.Common) func() {
	t.Helper()
	return apptest.Worker(t, workerConfig(t, c), quietLog())
}

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	c := commonConfig(t)
	url, g := startGateway(t, c)
	stopW := startWorker(t, c)
	db, err := store.Open(context.Background(), c.MySQL.DSN, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: db, Stock: g.Stock, Cfg: c, stopW: stopW}
}

// loadStock sets a new product's stock through the admin API and removes
// its keys at cleanup.
func (p *pipeline) loadStock(t *testing.T, sku string, n int) {
	t.Helper()
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	p.restock(t, sku, n)
}

// restock sets a product's stock through the admin API.
func (p *pipeline) restock(t *testing.T, sku string, n int) {
	t.Helper()
	apptest.PutStock(t, apitest.Client(t), p.Admin, p.Token, sku, n, "Flash item", 1999)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func openDB(t *testing.T, dsn string) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
