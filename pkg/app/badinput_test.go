package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// TestBadInput sends every kind of bad order and checks its specific
// answer, and that neither Redis nor MySQL changed.
func TestBadInput(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("bad-")
	p.loadStock(t, sku, 10)
	long := strings.Repeat("a", 65)
	cases := []struct {
		name, key, ctype, body string
		status                 int
		code                   string
	}{
		{"malformed JSON", "k1", "", `{"sku":`, 400, "invalid_request"},
		{"empty body", "k2", "", ``, 400, "invalid_request"},
		{"not an object", "k3", "", `[1,2]`, 400, "invalid_request"},
		{"two objects", "k4", "", `{"sku":"` + sku + `","qty":1,"customer_id":"c"}{}`, 400, "invalid_request"},
		{"missing sku", "k5", "", `{"qty":1,"customer_id":"c"}`, 400, "invalid_request"},
		{"missing qty", "k6", "", `{"sku":"` + sku + `","customer_id":"c"}`, 400, "invalid_request"},
		{"missing customer", "k7", "", `{"sku":"` + sku + `","qty":1}`, 400, "invalid_request"},
		{"qty as string", "k8", "", `{"sku":"` + sku + `","qty":"1","customer_id":"c"}`, 400, "invalid_request"},
		{"sku as number", "k9", "", `{"sku":12,"qty":1,"customer_id":"c"}`, 400, "invalid_request"},
		{"qty zero", "k10", "", orderBody(sku, 0, "c"), 400, "invalid_request"},
		{"qty negative", "k11", "", orderBody(sku, -3, "c"), 400, "invalid_request"},
		{"qty fractional", "k12", "", `{"sku":"` + sku + `","qty":1.5,"customer_id":"c"}`, 400, "invalid_request"},
		{"qty too large", "k13", "", orderBody(sku, order.MaxQty+1, "c"), 400, "invalid_request"},
		{"unknown field", "k14", "", `{"sku":"` + sku + `","qty":1,"customer_id":"c","price":0}`, 400, "invalid_request"},
		{"sku too long", "k15", "", orderBody(long, 1, "c"), 400, "invalid_request"},
		{"sku with hash tag braces", "k16", "", orderBody("a}b{", 1, "c"), 400, "invalid_request"},
		{"customer too long", "k17", "", orderBody(sku, 1, long), 400, "invalid_request"},
		{"no idempotency key", "", "", orderBody(sku, 1, "c"), 400, "invalid_request"},
		{"idempotency key too long", strings.Repeat("k", 129), "", orderBody(sku, 1, "c"), 400, "invalid_request"},
		{"idempotency key not ASCII", "clé", "", orderBody(sku, 1, "c"), 400, "invalid_request"},
		{"unknown sku", "k18", "", orderBody(testenv.Unique("nosuch-"), 1, "c"), 404, "unknown_sku"},
		{"oversized body", "k19", "", `{"sku":"` + strings.Repeat(" ", 5000) + `"}`, 413, "body_too_large"},
	}
	before := snapshot(t, p, sku)
	c := newClient(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/orders", strings.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if tc.key != "" {
				req.Header["Idempotency-Key"] = []string{tc.key}
			}
			// A body without customer_id conforms: with customer tokens
			// on, the token names the customer.
			if tc.code != "unknown_sku" && tc.name != "missing customer" {
				// Outside the contract on purpose: the answer is still
				// validated against api/openapi.yaml.
				req = apitest.Invalid(req)
			}
			a := do(t, c, req)
			if a.Status != tc.status || a.Error.Code != tc.code || a.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d %s with a message", a.Status, a.Error, tc.status, tc.code)
			}
			if diff := cmp.Diff(before, snapshot(t, p, sku)); diff != "" {
				t.Fatalf("state changed (-before +after):\n%s", diff)
			}
			if tc.key != "" {
				assertNoRecord(t, tc.key)
			}
		})
	}
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	_ = jsonDecode(resp.Body, &a)
	a.Status = resp.StatusCode
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	return a
}

type state struct {
	Redis               stock.View
	Sold, Stock, Orders int
}

func snapshot(t *testing.T, p *pipeline, sku string) state {
	t.Helper()
	ctx := context.Background()
	v, err := p.Stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := p.DB.Product(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.DB.DB().GetContext(ctx, &n, "SELECT COUNT(*) FROM orders"); err != nil {
		t.Fatal(err)
	}
	return state{Redis: v, Sold: prod.Sold, Stock: prod.Stock, Orders: n}
}

// assertNoRecord checks that no idempotency record was left for
// customer c's key.
func assertNoRecord(t *testing.T, key string) {
	t.Helper()
	rdb := testenv.Redis(t)
	for _, k := range recordKeys("c", key) {
		if n, err := rdb.Exists(context.Background(), k).Result(); err != nil || n != 0 {
			t.Fatalf("idempotency record for %q left behind (%d, %v)", key, n, err)
		}
	}
}

// recordKeys are the keys the idempotency record of a customer's key can
// have now: in the current idempotency window (24h, the default) or a
// neighbour (order.KeyWindow).
func recordKeys(customer, key string) []string {
	w := order.KeyWindow(customer, key, time.Now(), 24*time.Hour)
	return []string{keys.Idem(order.IDFor(customer, key, w-1)), keys.Idem(order.IDFor(customer, key, w)),
		keys.Idem(order.IDFor(customer, key, w+1))}
}
