package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/order"
	"surge/pkg/telemetry"
)

// The engines' stand-ins for the handler benchmark: each answers at once,
// so what is measured is the gateway's own work per order (decoding, the
// claim, reserve and publish calls and their observers, the answer).
type (
	benchClaims    struct{}
	benchStock     struct{}
	benchPublisher struct{}
	benchCatalog   struct{}
)

func (benchClaims) Claim(_ context.Context, o order.Order, key string) (order.Claim, error) {
	return order.Claim{OrderID: "o_0123456789abcdef01234567", Created: true, Nonce: "n"}, nil
}
func (benchClaims) Existing(context.Context, order.Order, string) (string, bool, error) {
	return "", false, nil
}
func (benchClaims) Forget(context.Context, order.Claim) (bool, error) { return true, nil }

func (benchStock) Reserve(context.Context, order.Order) (order.Reservation, error) {
	return order.Reservation{Avail: 1 << 30, Nonce: "n"}, nil
}
func (benchStock) ReserveRetry(context.Context, order.Order) (order.Reservation, error) {
	return order.Reservation{Avail: 1 << 30, Nonce: "n"}, nil
}
func (benchStock) Undo(context.Context, string, string, string) (int, error) { return 0, nil }

func (benchPublisher) Publish(context.Context, order.Order) error { return nil }

func (benchCatalog) Exists(context.Context, string) (bool, error) { return true, nil }

// benchServer is the gateway's order route on the stand-ins, observed as
// NewGateway observes it (traced when tel is enabled).
func benchServer(b *testing.B, tel *telemetry.Tracing, level slog.Level) http.Handler {
	b.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level}))
	orders := gateway.New(gateway.Service{Stock: benchStock{}, Idem: benchClaims{}, Queue: benchPublisher{}, Catalog: benchCatalog{},
		Log: log, Observer: gatewayObserver(false, tel, "orders")})
	api := &httpapi.Server{Orders: orders, Log: log}
	public, _ := instrumented(api, nil, tel)
	return public
}

// BenchmarkPostOrder is one accepted POST /v1/orders through the
// gateway's handler chain, with the engines answering at once: tracing
// off (no SURGE_OTLP_ENDPOINT, the default) at the default log level
// (info) and at warn (make bench's), and on with every span
// sampled and made but exported nowhere (the SDK's cost, not an
// exporter's).
func BenchmarkPostOrder(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) {
		tel, err := setupTracing(context.Background(), "", Tracing{}, "surge-gateway", slog.Default())
		if err != nil {
			b.Fatal(err)
		}
		benchPost(b, benchServer(b, tel, slog.LevelInfo))
	})
	b.Run("tracing=off,log=warn", func(b *testing.B) {
		tel, err := setupTracing(context.Background(), "", Tracing{}, "surge-gateway", slog.Default())
		if err != nil {
			b.Fatal(err)
		}
		benchPost(b, benchServer(b, tel, slog.LevelWarn))
	})
	b.Run("tracing=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider()
		defer func() { _ = tp.Shutdown(context.Background()) }()
		tel, err := setupTracing(context.Background(), "", Tracing{Provider: tp}, "surge-gateway", slog.Default())
		if err != nil {
			b.Fatal(err)
		}
		benchPost(b, benchServer(b, tel, slog.LevelInfo))
	})
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
