package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
)

// gatewayWithStallableBroker runs a gateway whose RabbitMQ connection goes
// through a proxy the test can stall, with a short confirm timeout, and a
// worker connected directly.
func gatewayWithStallableBroker(t *testing.T) (*pipeline, *testenv.Proxy) {
	t.Helper()
	c := commonConfig(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	cfg := apptest.GatewayConfig(t, c, "test-token")
	cfg.AMQP.URL = strings.Replace(c.AMQP.URL, "127.0.0.1:5672", proxy.Addr(), 1)
	cfg.ConfirmTimeout = 500 * time.Millisecond
	cfg.PublishChannels = 1 // opened by the first order, before any stall
	url, g := startGatewayConfig(t, cfg)
	stopW := startWorker(t, c)
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c, stopW: stopW}, proxy
}

// TestStalledConfirmIsAnUnknownOutcome: the broker takes the order but its
// confirm does not come back in time (as under a RabbitMQ memory alarm,
// whose publishes are enqueued when it lifts), or the client stops waiting
// for it. The gateway must not say "not taken": it answers 503
// outcome_unknown with the order id and keeps the reservation, the order
// is invoiced, and a retry with the same key answers 202 for that order.
func TestStalledConfirmIsAnUnknownOutcome(t *testing.T) {
	p, proxy := gatewayWithStallableBroker(t)
	sku := testenv.Unique("stall-")
	p.loadStock(t, sku, 6)
	// A first order opens the publisher's one channel: a stalled broker
	// would not answer the opening of a channel either.
	if warm := post(t, newClient(t), p.URL, "stall-0", orderBody(sku, 1, sku+"-w")); warm.Status != http.StatusAccepted {
		t.Fatalf("first order: %d %+v", warm.Status, warm.Error)
	}
	unknownBefore := max(0, series(scrape(t, p.Admin), "surge_orders_outcome_unknown_total"))
	proxy.Stall()
	slow := post(t, newClient(t), p.URL, "stall-1", orderBody(sku, 2, sku+"-a"))
	impatient := &http.Client{Timeout: 200 * time.Millisecond, Transport: apitest.Transport(t, nil)}
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/orders", strings.NewReader(orderBody(sku, 1, sku+"-b")))
	req.Header.Set("Idempotency-Key", "stall-2")
	if resp, err := impatient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("impatient client got %d before its timeout, want no answer", resp.StatusCode)
	}
	// The gateway gives up on the second confirm too, after the client
	// went: both orders are then counted as answered outcome_unknown.
	testkit.WaitFor(t, "the gateway to answer both stalled orders outcome_unknown", 20*time.Second, func() (bool, error) {
		return series(scrape(t, p.Admin), "surge_orders_outcome_unknown_total") >= unknownBefore+2, nil
	})
	if slow.Status != http.StatusServiceUnavailable || slow.Error.Code != "outcome_unknown" || slow.OrderID == "" {
		t.Fatalf("stalled confirm: %d %+v order %q, want 503 outcome_unknown with the order id",
			slow.Status, slow.Error, slow.OrderID)
	}
	if v, _ := p.Stock.View(context.Background(), sku); v.Avail != 2 {
		t.Fatalf("redis %+v: both orders must keep their units while unknown", v)
	}
	proxy.Resume()
	testkit.WaitFor(t, "both orders invoiced", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 3, err
	})
	for key, body := range map[string]string{"stall-1": orderBody(sku, 2, sku+"-a"), "stall-2": orderBody(sku, 1, sku+"-b")} {
		again := post(t, newClient(t), p.URL, key, body)
		if again.Status != http.StatusAccepted {
			t.Fatalf("retry of %s: %d %+v, want 202 for the invoiced order", key, again.Status, again.Error)
		}
	}
	testkit.WaitFor(t, "redis to settle", 20*time.Second, func() (bool, error) {
		v, err := p.Stock.View(context.Background(), sku)
		return err == nil && v.Sold == 4 && v.Avail == 2 && v.Reserved == 0, err
	})
	if n, _ := p.DB.InvoiceCount(context.Background(), sku); n != 3 {
		t.Fatalf("%d invoices after the retries, want 3", n)
	}
}

// TestKeyReusedAfterItsWindow: a checkout uses an Idempotency-Key again
// after its record expired (here after 2s). That is a new order: it must
// be answered with a new order id and be invoiced, not answered 202 for
// the order MySQL holds under the key's old id and never invoiced.
func TestKeyReusedAfterItsWindow(t *testing.T) {
	c := commonConfig(t)
	c.IdempotencyTTL = 2 * time.Second
	url, g := startGateway(t, c)
	startWorker(t, c)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c}
	mug, tee := testenv.Unique("reuse-mug-"), testenv.Unique("reuse-tee-")
	p.loadStock(t, mug, 5)
	p.loadStock(t, tee, 5)
	buyer := testenv.Unique("c-")
	first := post(t, newClient(t), p.URL, "cart-7", orderBody(mug, 1, buyer))
	if first.Status != http.StatusAccepted {
		t.Fatalf("first order: %d %+v", first.Status, first.Error)
	}
	testkit.WaitFor(t, "the first order invoiced", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), mug)
		return n == 1, err
	})
	rdb := testenv.Redis(t)
	testkit.WaitFor(t, "the key's record to expire", c.IdempotencyTTL+10*time.Second, func() (bool, error) {
		n, err := rdb.Exists(context.Background(), keys.Idem(first.OrderID)).Result()
		return err == nil && n == 0, err
	})
	reused := post(t, newClient(t), p.URL, "cart-7", orderBody(tee, 2, buyer))
	if reused.Status != http.StatusAccepted || reused.OrderID == first.OrderID {
		t.Fatalf("key reused after its window: %d %+v order %s, want 202 for a new order (not %s)",
			reused.Status, reused.Error, reused.OrderID, first.OrderID)
	}
	testkit.WaitFor(t, "the new order invoiced", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), tee)
		return n == 1, err
	})
	testkit.WaitFor(t, "redis to agree with mysql", 20*time.Second, func() (bool, error) {
		v, err := p.Stock.View(context.Background(), tee)
		return err == nil && v.Sold == 2 && v.Reserved == 0 && v.Sold == snapshot(t, p, tee).Sold, err
	})
}
