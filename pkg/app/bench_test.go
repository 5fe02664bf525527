package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/metrics"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// The engines' stand-ins for the handler benchmark: each answers at once,
// so what is measured is the gateway's own work per order (decoding, the
// claim, reserve and publish calls through their wrappers, the answer).
type (
	benchClaims    struct{}
	benchStock     struct{}
	benchPublisher struct{}
	benchCatalog   struct{}
)

func (benchClaims) Claim(_ context.Context, o order.Order, key string, _ bool) (order.Claim, error) {
	return order.Claim{OrderID: "o_0123456789abcdef01234567", Created: true, Nonce: "n"}, nil
}
func (benchClaims) Existing(context.Context, order.Order, string) (string, bool, error) {
	return "", false, nil
}
func (benchClaims) Forget(context.Context, order.Claim) (bool, error) { return true, nil }
func (benchClaims) Unmark(context.Context, order.Claim) (bool, error) { return true, nil }

func (benchStock) Reserve(context.Context, order.Order) (stock.Reservation, error) {
	return stock.Reservation{Avail: 1 << 30, Nonce: "n"}, nil
}
func (benchStock) ReserveRetry(context.Context, order.Order) (stock.Reservation, error) {
	return stock.Reservation{Avail: 1 << 30, Nonce: "n"}, nil
}
func (benchStock) Undo(context.Context, string, string, string) (int, error) { return 0, nil }

func (benchPublisher) Publish(context.Context, order.Order) error { return nil }

func (benchCatalog) Exists(context.Context, string) (bool, error) { return true, nil }

// benchServer is the gateway's order route on the stand-ins, wrapped as
// NewGateway wraps it.
func benchServer(b *testing.B) http.Handler {
	b.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	api := &httpapi.Server{
		Orders: &gateway.Service{Stock: metrics.Reserver{Next: benchStock{}}, Idem: benchClaims{},
			Queue: metrics.Publisher{Next: benchPublisher{}}, Catalog: benchCatalog{}, Log: log},
		Log: log,
	}
	return instrumented(api, nil)
}

// BenchmarkPostOrder is one accepted POST /v1/orders through the
// gateway's handler chain, with the engines answering at once.
func BenchmarkPostOrder(b *testing.B) {
	h := benchServer(b)
	benchPost(b, h)
}

func benchPost(b *testing.B, h http.Handler) {
	const body = `{"sku":"tshirt-42","qty":1,"customer_id":"alice"}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("answer %d: %s", w.Code, w.Body)
		}
	}
}
