package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"surge/pkg/order"
)

// verifierFunc is a CustomerVerifier.
type verifierFunc func(ctx context.Context, token string) (string, error)

func (f verifierFunc) Verify(ctx context.Context, token string) (string, error) { return f(ctx, token) }

var _ CustomerVerifier = verifierFunc(nil)

// TestCustomerTokenNotCheckedYet: a token the keys cannot decide yet (the
// fetch that may hold its key is a few seconds off) is answered 503
// unavailable with Retry-After the verifier names, rounded up, and, as
// anyone can send such tokens, is a debug line, not an error line; no
// order is taken.
func TestCustomerTokenNotCheckedYet(t *testing.T) {
	var logs bytes.Buffer
	acc := &acceptAll{}
	s := &Server{Orders: acc, Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Customers: verifierFunc(func(context.Context, string) (string, error) {
			return "", fmt.Errorf("token: %w", &order.UnavailableError{
				Cause: fmt.Errorf("key not fetched yet: %w", order.ErrUnavailable), RetryAfter: 3200 * time.Millisecond})
		})}
	h := s.Handler()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"sku":"sku-1","qty":1}`))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Authorization", "Bearer a.b.c")
	rec := serve(h, req)

	var body errorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusServiceUnavailable || body.Error.Code != "unavailable" || rec.Header().Get("Retry-After") != "4" {
		t.Errorf("answer %d %+v, Retry-After %q; want 503 unavailable, Retry-After 4", rec.Code, body, rec.Header().Get("Retry-After"))
	}
	if acc.n != 0 {
		t.Errorf("%d orders taken, want none", acc.n)
	}
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Level != slog.LevelDebug.String() {
			t.Errorf("log line at %s: %s", rec.Level, line)
		}
	}
	if logs.Len() == 0 {
		t.Errorf("no log line, want a debug line")
	}
}
