package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// TestIdempotencyKey: the same key and body is answered as the first time
// and reserves once; the same key with another body is refused with 422.
func TestIdempotencyKey(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("idem-")
	p.loadStock(t, sku, 10)
	c := newClient(t)
	first := post(t, c, p.URL, "same-key", orderBody(sku, 2, sku+"-alice"))
	again := post(t, c, p.URL, "same-key", orderBody(sku, 2, sku+"-alice"))
	if first.Status != 202 || again.Status != 202 || first.OrderID != again.OrderID {
		t.Fatalf("first %d %s, again %d %s: want the same 202", first.Status, first.OrderID, again.Status, again.OrderID)
	}
	before := snapshot(t, p, sku)
	other := post(t, c, p.URL, "same-key", orderBody(sku, 3, sku+"-alice"))
	if other.Status != http.StatusUnprocessableEntity || other.Error.Code != "idempotency_mismatch" {
		t.Fatalf("other body: %d %+v, want 422 idempotency_mismatch", other.Status, other.Error)
	}
	// The worker may commit meanwhile (reserved -> sold); avail must not move.
	if after := snapshot(t, p, sku); after.Redis.Avail != before.Redis.Avail ||
		after.Redis.Reserved+after.Redis.Sold != before.Redis.Reserved+before.Redis.Sold {
		t.Fatalf("422 changed Redis: %+v -> %+v", before.Redis, after.Redis)
	}
	bob := post(t, c, p.URL, "same-key", orderBody(sku, 2, sku+"-bob"))
	if bob.Status != 202 || bob.OrderID == first.OrderID {
		t.Fatalf("another customer's key: %d %s, want a new order", bob.Status, bob.OrderID)
	}
	testkit.WaitFor(t, "two invoices", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 2, err
	})
	v, _ := p.Stock.View(context.Background(), sku)
	if v.Sold != 4 || v.Avail != 6 {
		t.Fatalf("after two orders of 2: %+v", v)
	}
}

// gatewayBehindProxy runs a gateway whose RabbitMQ connection goes
// through a proxy the test can cut.
func gatewayBehindProxy(t *testing.T) (*pipeline, *testenv.Proxy) {
	t.Helper()
	c := commonConfig(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	direct := c
	c.AMQP.URL = strings.Replace(c.AMQP.URL, "127.0.0.1:5672", proxy.Addr(), 1)
	url, g := startGateway(t, c)
	db := openDB(t, c.MySQL.DSN)
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: db, Stock: g.Stock, Cfg: direct}, proxy
}

// TestBrokerUnreachable: with RabbitMQ cut off, orders get 503 with
// Retry-After and nothing stays reserved; once it is back, orders pass.
func TestBrokerUnreachable(t *testing.T) {
	p, proxy := gatewayBehindProxy(t)
	sku := testenv.Unique("down-")
	p.loadStock(t, sku, 5)
	before := snapshot(t, p, sku)
	proxy.Cut()
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/orders", strings.NewReader(orderBody(sku, 1, sku)))
	req.Header.Set("Idempotency-Key", "down-1")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("broker cut: %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	after := snapshot(t, p, sku)
	if after.Redis.Avail != before.Redis.Avail || after.Redis.Reserved != 0 {
		t.Fatalf("reservation left after 503: %+v", after.Redis)
	}
	proxy.Restore()
	testkit.WaitFor(t, "the gateway to publish again", 20*time.Second, func() (bool, error) {
		a := post(t, newClient(t), p.URL, "down-1", orderBody(sku, 1, sku))
		return a.Status == http.StatusAccepted, nil
	})
}

// TestBrokerRefuses: when the broker cannot route the order (its queue is
// gone), the publish is returned and the gateway answers 503, releasing
// the reservation.
func TestBrokerRefuses(t *testing.T) {
	c := commonConfig(t)
	url, g := startGateway(t, c)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN), Stock: g.Stock, Cfg: c}
	sku := testenv.Unique("refuse-")
	p.loadStock(t, sku, 5)
	conn, err := amqp.Dial(c.AMQP.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	topo := c.AMQP.Topology()
	if err := ch.QueueUnbind(topo.Queue, topo.RoutingKey, topo.Exchange, nil); err != nil {
		t.Fatal(err)
	}
	a := post(t, newClient(t), p.URL, "refused-1", orderBody(sku, 2, sku))
	if a.Status != http.StatusServiceUnavailable || a.Error.Code != "unavailable" {
		t.Fatalf("unroutable: %d %+v, want 503 unavailable", a.Status, a.Error)
	}
	v, _ := p.Stock.View(context.Background(), sku)
	if v.Avail != 5 || v.Reserved != 0 {
		t.Fatalf("reservation left after a returned publish: %+v", v)
	}
}

// TestDuplicateDelivery: the same order message delivered twice yields one
// invoice and one commit in Redis.
func TestDuplicateDelivery(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("dup-")
	p.loadStock(t, sku, 5)
	a := post(t, newClient(t), p.URL, "dup-1", orderBody(sku, 2, sku))
	if a.Status != 202 {
		t.Fatalf("order: %d %+v", a.Status, a.Error)
	}
	testkit.WaitFor(t, "the invoice", 20*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 1, err
	})
	conn, err := queue.Dial(context.Background(), p.Cfg.AMQP.URL, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pub, err := queue.NewPublisher(conn, p.Cfg.AMQP.Topology(), queue.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	dup := order.Order{ID: a.OrderID, SKU: sku, Qty: 2, CustomerID: sku}
	for i := 0; i < 2; i++ {
		if err := pub.Publish(context.Background(), dup); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the queue to drain", 20*time.Second, func() (bool, error) {
		n, _, err := queue.QueueDepth(context.Background(), conn, p.Cfg.AMQP.Topology().Queue)
		return n == 0, err
	})
	p.stopW() // waits for in-flight deliveries to be settled
	n, err := p.DB.InvoiceCount(context.Background(), sku)
	if err != nil || n != 1 {
		t.Fatalf("invoices %d (%v), want 1", n, err)
	}
	v, _ := p.Stock.View(context.Background(), sku)
	if v.Sold != 2 || v.Avail != 3 || v.Reserved != 0 {
		t.Fatalf("redis after duplicates: %+v", v)
	}
}
