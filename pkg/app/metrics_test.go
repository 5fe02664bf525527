package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/app"
	"surge/pkg/config"
)

// scrape reads url's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := apitest.Client(t).Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series reads one series: a counter's value or a histogram's count; -1
// when absent. labels are "k=v" pairs, all of which must match.
func series(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestMetricsMoveWhenOrdersFlow: five buyers race for three units and the
// product is read twice; the counters on /metrics move by exactly what
// happened.
func TestMetricsMoveWhenOrdersFlow(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("metrics-")
	p.loadStock(t, sku, 3)
	watched := []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"surge_reservations_total", []string{"outcome=reserved"}, 3},
		// The third reservation took the last unit, so the gateway answers
		// the last two buyers from a read of the SKU, without a claim or
		// the script: their customers' budgets are not asked.
		{"surge_reservations_total", []string{"outcome=sold_out"}, 0},
		{"surge_reservations_total", []string{"outcome=sold_out_cached"}, 2},
		{"surge_publish_total", []string{"result=confirmed"}, 3},
		{"surge_publish_duration_seconds", nil, 3},
		{"surge_worker_orders_total", []string{"outcome=invoiced"}, 3},
		{"surge_worker_processing_seconds", []string{"outcome=invoiced"}, 3},
		{"surge_order_accepted_to_invoiced_seconds", nil, 3},
		{"surge_http_request_duration_seconds", []string{"route=POST /v1/orders", "status=202"}, 3},
		{"surge_http_request_duration_seconds", []string{"route=POST /v1/orders", "status=409"}, 2},
		{"surge_rate_limit_decisions_total", []string{"scope=customer", "decision=allowed"}, 3},
		{"surge_lock_acquisitions_total", []string{"result=acquired"}, 3},
		{"surge_lock_acquisitions_total", []string{"result=contended"}, 0},
		{"surge_cache_requests_total", []string{"result=miss"}, 1},
		{"surge_cache_requests_total", []string{"result=hit"}, 1},
		{"surge_cache_rebuilds_total", []string{"result=ok"}, 1},
	}
	before := scrape(t, p.Admin)
	c := newClient(t)
	for i := range 5 {
		a := post(t, c, p.URL, "k-"+itoa(i), orderBody(sku, 1, sku+"-c"+itoa(i)))
		if a.Status != http.StatusAccepted && a.Status != http.StatusConflict {
			t.Fatalf("order %d: %d %+v", i, a.Status, a.Error)
		}
	}
	testkit.WaitFor(t, "3 invoices", 30*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 3, err
	})
	// A cold product read rebuilds the view once; the next one hits.
	for range 2 {
		resp, err := c.Get(p.URL + "/v1/products/" + sku)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET product: %d", resp.StatusCode)
		}
	}
	// The worker observes an order right after acking it.
	var after map[string]*dto.MetricFamily
	testkit.WaitFor(t, "the worker's observations", 10*time.Second, func() (bool, error) {
		after = scrape(t, p.Admin)
		n := series(after, "surge_worker_orders_total", "outcome=invoiced") -
			max(series(before, "surge_worker_orders_total", "outcome=invoiced"), 0)
		return n >= 3, nil
	})
	for _, w := range watched {
		d := series(after, w.name, w.labels...) - max(series(before, w.name, w.labels...), 0)
		if d != w.delta {
			t.Errorf("%s%v moved by %v, want %v", w.name, w.labels, d, w.delta)
		}
	}
}

// TestRateLimitAnswers429: a customer past its burst gets 429 with
// Retry-After, and the refused order reserves nothing.
func TestRateLimitAnswers429(t *testing.T) {
	c := commonConfig(t)
	cfg := app.GatewayConfig{Common: c, AdminToken: "test-token"}
	cfg.RateLimit.CustomerRate, cfg.RateLimit.CustomerBurst = 0.01, 2 // no refill during the test
	url, g := startGatewayConfig(t, cfg)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", Stock: g.Stock, Cfg: c}
	sku := testenv.Unique("limit-")
	p.loadStock(t, sku, 10)
	customer := testenv.Unique("greedy-")
	before := scrape(t, p.Admin)
	hc := newClient(t)
	for i := range 2 {
		if a := post(t, hc, url, "k-"+itoa(i), orderBody(sku, 1, customer)); a.Status != http.StatusAccepted {
			t.Fatalf("order %d within the burst: %d %+v", i, a.Status, a.Error)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/orders", strings.NewReader(orderBody(sku, 1, customer)))
	req.Header.Set("Idempotency-Key", "k-2")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third order: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if a := post(t, hc, url, "k-0", orderBody(sku, 1, testenv.Unique("other-"))); a.Status != http.StatusAccepted {
		t.Fatalf("another customer: %d %+v, want 202 (budgets are per customer)", a.Status, a.Error)
	}
	v, err := g.Stock.View(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if v.Reserved+v.Sold != 3 || v.Avail != 7 {
		t.Fatalf("stock %+v, want 3 units taken: the limited order must reserve nothing", v)
	}
	after := scrape(t, p.Admin)
	d := series(after, "surge_rate_limit_decisions_total", "scope=customer", "decision=limited") -
		series(before, "surge_rate_limit_decisions_total", "scope=customer", "decision=limited")
	if d != 1 {
		t.Fatalf("limited decisions moved by %v, want 1", d)
	}
}

// TestRateLimitConfigFromEnvironment: the variables operators set reach
// the gateway's configuration.
func TestRateLimitConfigFromEnvironment(t *testing.T) {
	t.Setenv("SURGE_RATE_LIMIT_CUSTOMER_RATE", "5")
	t.Setenv("SURGE_RATE_LIMIT_IP_RATE", "-1")
	var cfg app.GatewayConfig
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	r := cfg.RateLimit
	if r.CustomerRate != 5 || r.CustomerBurst != 40 || r.IPRate != -1 || r.IPBurst != 20000 {
		t.Fatalf("rate limit config %+v", r)
	}
}
