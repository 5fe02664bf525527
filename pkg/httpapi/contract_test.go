package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestRequestIDs(t *testing.T) {
	s := &Server{Orders: &acceptAll{}}
	h := RequestIDs(s.Handler())
	get := func(id string) string {
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		if id != "" {
			r.Header.Set(HeaderRequestID, id)
		}
		return serve(h, r).Header().Get(HeaderRequestID)
	}
	if got := get("checkout-42:a.b_c"); got != "checkout-42:a.b_c" {
		t.Fatalf("well-formed id answered %q, want it echoed", got)
	}
	for _, bad := range []string{"", "has space", "x\r\nSet-Cookie: a=b", strings.Repeat("a", 129)} {
		if got := get(bad); got == "" || got == bad || len(got) != 26 {
			t.Fatalf("id %q answered %q, want a new 26-character id", bad, got)
		}
	}
}

func TestAcceptedCarriesLocation(t *testing.T) {
	s := &Server{Orders: &acceptAll{}}
	rec := postAs(t, s.Handler(), "alice")
	if rec.Code != http.StatusAccepted || rec.Header().Get("Location") != "/v1/orders/o_1" {
		t.Fatalf("202 %d Location %q, want /v1/orders/o_1", rec.Code, rec.Header().Get("Location"))
	}
}

// TestRateLimitHeaders: a 429 names the budget it hit and when a request
// fits again (draft-ietf-httpapi-ratelimit-headers).
func TestRateLimitHeaders(t *testing.T) {
	acc := &limitedAcceptor{budget: &budget{left: map[string]int{}, after: 1500 * time.Millisecond}}
	policies := map[string]RatePolicy{"customer": {Quota: 40, Window: 2 * time.Second}, ScopeIP: {Quota: 20000, Window: 2 * time.Second}}
	s := &Server{Orders: acc, RatePolicies: policies}
	rec := postAs(t, s.Handler(), "alice")
	if got := rec.Header().Get("RateLimit-Policy"); got != `"customer";q=40;w=2` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if got := rec.Header().Get("RateLimit"); got != `"customer";r=0;t=2` {
		t.Fatalf("RateLimit %q", got)
	}
	ip := &Server{Orders: &acceptAll{}, RatePolicies: policies, IPLimit: &budget{left: map[string]int{}, after: time.Second}}
	rec = postAs(t, ip.Handler(), "bob")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("RateLimit-Policy") != `"ip";q=20000;w=2` {
		t.Fatalf("IP limit: %d RateLimit-Policy %q", rec.Code, rec.Header().Get("RateLimit-Policy"))
	}
}

// TestCORS: a preflight from an allowed origin may POST with the order's
// headers and read the answer's; another origin gets no CORS header.
func TestCORS(t *testing.T) {
	s := &Server{Orders: &acceptAll{}}
	h := CORS([]string{"https://shop.example"}, s.Handler())
	pre := func(origin string) http.Header {
		r := httptest.NewRequest(http.MethodOptions, "/v1/orders", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "content-type,idempotency-key")
		return serve(h, r).Header()
	}
	ok := pre("https://shop.example")
	if ok.Get("Access-Control-Allow-Origin") != "https://shop.example" ||
		!strings.Contains(strings.ToLower(ok.Get("Access-Control-Allow-Headers")), "idempotency-key") {
		t.Fatalf("preflight from the shop: %v", ok)
	}
	if other := pre("https://evil.example"); other.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin got %v", other)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"sku":"s","qty":1,"customer_id":"c"}`))
	r.Header.Set("Origin", "https://shop.example")
	r.Header.Set("Idempotency-Key", "k")
	rec := serve(h, r)
	exposed := strings.ToLower(rec.Header().Get("Access-Control-Expose-Headers"))
	for _, want := range []string{"location", "retry-after", "ratelimit", "ratelimit-policy", "x-request-id"} {
		if !strings.Contains(exposed, want) {
			t.Fatalf("exposed headers %q lack %s", exposed, want)
		}
	}
}
