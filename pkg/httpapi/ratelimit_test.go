package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"surge/pkg/gateway"
	"surge/pkg/order"
)

// budget refuses a subject once its n requests are spent.
type budget struct {
	left  map[string]int
	after time.Duration
	err   error
}

func (b *budget) Allow(_ context.Context, subject string) (bool, time.Duration, error) {
	if b.err != nil {
		return true, 0, b.err
	}
	if b.left[subject] <= 0 {
		return false, b.after, nil
	}
	b.left[subject]--
	return true, 0, nil
}

// acceptAll accepts every order but those for a SKU in soldOut, which
// RefuseSoldOut answers sold out; Refused answers the refusal, unless the
// customer is in open (their key names an order that may be taken).
type acceptAll struct {
	n       int
	open    map[string]bool
	soldOut map[string]bool
}

func (a *acceptAll) RefuseSoldOut(_ context.Context, o order.Order, _ string) error {
	if a.soldOut[o.SKU] {
		return fmt.Errorf("sku %s: %w", o.SKU, order.ErrSoldOut)
	}
	return nil
}

func (a *acceptAll) Accept(_ context.Context, o order.Order, _ string) (gateway.Accepted, error) {
	a.n++
	return gateway.Accepted{OrderID: "o_1", Status: order.StatusAccepted, SKU: o.SKU, Qty: o.Qty}, nil
}

func (a *acceptAll) Refused(_ context.Context, o order.Order, _ string, cause error) error {
	if a.open[o.CustomerID] {
		return &order.UnknownOutcomeError{OrderID: "o_1", Cause: cause}
	}
	return cause
}

// limitedAcceptor refuses customers over their budget the way
// gateway.Service does: an error wrapping *order.RateLimitedError.
type limitedAcceptor struct {
	acceptAll
	budget *budget
}

func (a *limitedAcceptor) Accept(ctx context.Context, o order.Order, key string) (gateway.Accepted, error) {
	if ok, after, _ := a.budget.Allow(ctx, o.CustomerID); !ok {
		return gateway.Accepted{}, fmt.Errorf("customer %s: %w", o.CustomerID, &order.RateLimitedError{RetryAfter: after, Scope: "customer"})
	}
	return a.acceptAll.Accept(ctx, o, key)
}

func postAs(t *testing.T, h http.Handler, customer string) *httptest.ResponseRecorder {
	t.Helper()
	body := `{"sku":"sku-1","qty":1,"customer_id":"` + customer + `"}`
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", "k1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	acc := &limitedAcceptor{budget: &budget{left: map[string]int{"alice": 2}, after: 1500 * time.Millisecond}}
	s := &Server{Orders: acc, IPLimit: &budget{left: map[string]int{"192.0.2.1": 100}}}
	h := s.Handler()
	for i := range 2 {
		if rec := postAs(t, h, "alice"); rec.Code != http.StatusAccepted {
			t.Fatalf("request %d: %d %s, want 202", i+1, rec.Code, rec.Body)
		}
	}
	rec := postAs(t, h, "alice")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("third request: %d Retry-After %q, want 429 with Retry-After 2", rec.Code, rec.Header().Get("Retry-After"))
	}
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != "rate_limited" {
		t.Fatalf("429 body %s (err %v), want code rate_limited", rec.Body, err)
	}
	if acc.n != 2 {
		t.Fatalf("%d orders accepted, want 2: a limited request must not reserve", acc.n)
	}
}

func TestRateLimitPerIPAndFailOpen(t *testing.T) {
	acc := &acceptAll{}
	s := &Server{Orders: acc, IPLimit: &budget{left: map[string]int{}, after: 10 * time.Millisecond}}
	h := s.Handler()
	rec := postAs(t, h, "bob")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("empty IP budget: %d Retry-After %q, want 429 with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	s2 := &Server{Orders: acc, IPLimit: &budget{err: errors.New("redis down")}}
	if rec := postAs(t, s2.Handler(), "bob"); rec.Code != http.StatusAccepted {
		t.Fatalf("limiter failing: %d, want the request let through (202)", rec.Code)
	}
}

// TestIPLimitedRetryOfAnOpenOrder: a request over its address's budget
// whose key names an order that may be taken is answered outcome_unknown
// with the order id, not 429 ("not taken").
func TestIPLimitedRetryOfAnOpenOrder(t *testing.T) {
	acc := &acceptAll{open: map[string]bool{"carol": true}}
	s := &Server{Orders: acc, IPLimit: &budget{left: map[string]int{}, after: 10 * time.Millisecond}}
	rec := postAs(t, s.Handler(), "carol")
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusServiceUnavailable ||
		e.Error.Code != "outcome_unknown" || e.OrderID != "o_1" {
		t.Fatalf("limited retry of an open order: %d %s, want 503 outcome_unknown for o_1", rec.Code, rec.Body)
	}
	if acc.n != 0 {
		t.Fatal("a limited request reached Accept")
	}
}

// TestSoldOutAnsweredBeforeTheIPBudget: an order for a sold-out SKU is
// answered 409 sold_out from the sighting before the client address's
// budget is asked: a hammering client's refusals spend none of it (no
// Redis call), and the address's first order for a SKU with units left
// is still let through.
func TestSoldOutAnsweredBeforeTheIPBudget(t *testing.T) {
	acc := &acceptAll{soldOut: map[string]bool{"sku-1": true}}
	ips := &budget{left: map[string]int{"192.0.2.1": 1}, after: time.Second}
	s := &Server{Orders: acc, IPLimit: ips}
	h := s.Handler()
	for i := range 5 {
		rec := postAs(t, h, "dave")
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusConflict || e.Error.Code != "sold_out" {
			t.Fatalf("order %d for a sold-out SKU: %d %s, want 409 sold_out", i+1, rec.Code, rec.Body)
		}
	}
	if ips.left["192.0.2.1"] != 1 || acc.n != 0 {
		t.Fatalf("IP budget left %d, orders accepted %d: want the budget untouched and nothing accepted",
			ips.left["192.0.2.1"], acc.n)
	}
	acc.soldOut = nil
	if rec := postAs(t, h, "dave"); rec.Code != http.StatusAccepted {
		t.Fatalf("the address's first order with units left: %d %s, want 202", rec.Code, rec.Body)
	}
}

// limitLog records what a LimitObserver is told.
type limitLog []string

func (l *limitLog) LimitDecided(scope string, allowed bool, err error) {
	*l = append(*l, fmt.Sprint(scope, " allowed=", allowed, " err=", err != nil))
}

// TestLimitObserverSeesEachDecision: the observer is told each decision of
// the per-IP limit: allowed, limited, and a failing limiter (let through).
func TestLimitObserverSeesEachDecision(t *testing.T) {
	var log limitLog
	ips := &budget{left: map[string]int{"192.0.2.1": 1}, after: 10 * time.Millisecond}
	s := &Server{Orders: &acceptAll{}, IPLimit: ips, LimitObserver: &log}
	h := s.Handler()
	postAs(t, h, "bob")
	postAs(t, h, "bob")
	ips.err = errors.New("redis down")
	postAs(t, h, "bob")
	want := []string{"ip allowed=true err=false", "ip allowed=false err=false", "ip allowed=true err=true"}
	if !slices.Equal(log, want) {
		t.Fatalf("observer told %q, want %q", log, want)
	}
}
