// Package apptest runs surge's gateway and worker inside a test, on the
// real engines, until the test's cleanup. The pipeline tests (pkg/app) and
// the failover tests (test/chaos) share it.
package apptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/config"
)

// Common returns configuration for the local engines on fresh names (an
// exchange and queues of the test's own, deleted at cleanup; short retry
// tiers), with the test database migrated.
func Common(t testing.TB) config.Common {
	t.Helper()
	var c config.Common
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	c.Redis.Addrs, c.Redis.Password = testenv.RedisAddrs(), testenv.RedisPassword()
	testenv.Redis(t)
	c.AMQP.URL = testenv.AMQPURL(t)
	name := testenv.Unique("t.orders.")
	c.AMQP.Exchange, c.AMQP.Queue, c.AMQP.DeadQueue = name, name+".created", name+".dead"
	c.AMQP.RetryDelays = []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}
	c.MySQL.DSN = testenv.MySQLDSN(t)
	if err := app.Migrate(context.Background(), c.MySQL.DSN, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DeleteTopology(c) })
	return c
}

// PutStock sets sku's stock through the admin API at url (the gateway's
// admin listener, AdminURL) with c (the product, named name at priceCents, is created when
// missing), and fails t unless the gateway answers 200.
func PutStock(t testing.TB, c *http.Client, url, token, sku string, stock int, name string, priceCents int) {
	t.Helper()
	body := fmt.Sprintf(`{"stock":%d,"name":%q,"price_cents":%d}`, stock, name, priceCents)
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/admin/stock/"+sku, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("load stock of %s: %d %s", sku, resp.StatusCode, b)
	}
}

// GatewayConfig is the gateway's production defaults (SURGE_ variables)
// on c, with the admin token given.
func GatewayConfig(t testing.TB, c config.Common, adminToken string) app.GatewayConfig {
	t.Helper()
	var cfg app.GatewayConfig
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Common, cfg.AdminToken = c, adminToken
	return cfg
}

// WorkerConfig is the worker's production defaults (batching, locks) on
// c, with no metrics listener.
func WorkerConfig(t testing.TB, c config.Common) app.WorkerConfig {
	t.Helper()
	var cfg app.WorkerConfig
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Common, cfg.MetricsAddr = c, ""
	return cfg
}

// Gateway runs a gateway with cfg on free local ports until cleanup and
// returns its public base URL; AdminURL(g) is its admin listener's.
func Gateway(t testing.TB, cfg app.GatewayConfig, log *slog.Logger) (string, *app.Gateway) {
	t.Helper()
	cfg.HTTPAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	g, err := app.NewGateway(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := g.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	})
	return "http://" + g.Addr(), g
}

// AdminURL is the base URL of g's admin listener (the admin API, /metrics,
// the console).
func AdminURL(g *app.Gateway) string { return "http://" + g.AdminAddr() }

// Worker runs a worker pool with cfg; the returned func stops it and waits
// for its shutdown (also done at cleanup).
func Worker(t testing.TB, cfg app.WorkerConfig, log *slog.Logger) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := app.NewWorker(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("worker run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// DeleteTopology removes c's exchanges and queues, best effort: the names
// are the test's own.
func DeleteTopology(c config.Common) {
	conn, err := amqp.Dial(c.AMQP.URL)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	_ = c.AMQP.Topology().Delete(ch)
}
