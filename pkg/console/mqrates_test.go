package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// managementAPI answers GET /api/queues/{vhost} as RabbitMQ's management
// plugin does (the shape of 3.x and 4.x), for user:pass only.
func managementAPI(t *testing.T, user, pass string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			http.Error(w, `{"error":"not_authorized"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.EscapedPath() != "/api/queues/%2F" || r.URL.Query().Get("columns") != "name,message_stats" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`[{"name":"orders.created","message_stats":{"publish":120,"publish_details":{"rate":41.5},
			"deliver_get_details":{"rate":40.2},"ack_details":{"rate":39.8}}},{"name":"orders.dead"}]`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestManagementRates(t *testing.T) {
	ctx := context.Background()
	srv := managementAPI(t, "surge-ops", "s3cret")

	// Credentials in the URL win; the vhost comes from the AMQP URL.
	withCreds := strings.Replace(srv.URL, "http://", "http://surge-ops:s3cret@", 1)
	m, err := NewManagement(withCreds+"/", "amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatal(err)
	}
	rates, err := m.Rates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rates["orders.created"]; got != (QueueRate{Publish: 41.5, Deliver: 40.2, Ack: 39.8}) {
		t.Errorf("orders.created = %+v", got)
	}
	if got, ok := rates["orders.dead"]; !ok || got != (QueueRate{}) {
		t.Errorf("a queue without messages: %+v, %v; want zero rates", got, ok)
	}

	// Without credentials in the URL, the AMQP URL's are sent.
	m, _ = NewManagement(srv.URL, "amqp://surge-ops:s3cret@rabbit-1:5672/,amqp://x:y@rabbit-2:5672/")
	if _, err := m.Rates(ctx); err != nil {
		t.Errorf("AMQP URL's credentials: %v", err)
	}
	m, _ = NewManagement(srv.URL, "amqp://guest:guest@127.0.0.1:5672/")
	if _, err := m.Rates(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong credentials: %v, want the 401", err)
	}
	for _, bad := range []string{"", "rabbitmq:15672", "amqp://rabbitmq:5672/"} {
		if _, err := NewManagement(bad, ""); err == nil || !strings.Contains(err.Error(), "SURGE_RABBITMQ_MANAGEMENT_URL") {
			t.Errorf("NewManagement(%q) = %v, want an error naming the variable", bad, err)
		}
	}
}

// TestHealthRates: the queues show the management API's rates, or n/a
// with the reason, plainly.
func TestHealthRates(t *testing.T) {
	ctx := context.Background()
	h := &Health{Queues: []string{"orders.created", "orders.retry.1s"}}
	if d := h.gather(ctx); d.Queues[0].Rate != nil || !strings.Contains(d.RatesNote, "n/a: set SURGE_RABBITMQ_MANAGEMENT_URL") {
		t.Errorf("no management URL: %+v, note %q", d.Queues[0], d.RatesNote)
	}
	srv := managementAPI(t, "guest", "guest")
	m, _ := NewManagement(srv.URL, "amqp://guest:guest@127.0.0.1:5672/")
	h.Rates = m.Rates
	d := h.gather(ctx)
	if d.RatesNote != "" || d.Queues[0].Rate == nil || d.Queues[0].Rate.Publish != 41.5 || d.Queues[1].Rate != nil {
		t.Errorf("with the API: note %q, queues %+v %+v", d.RatesNote, d.Queues[0].Rate, d.Queues[1].Rate)
	}
	srv.Close()
	if d := h.gather(ctx); !strings.HasPrefix(d.RatesNote, "n/a: RabbitMQ management API") {
		t.Errorf("API down: note %q", d.RatesNote)
	}
}
