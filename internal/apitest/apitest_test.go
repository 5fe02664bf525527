package apitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"surge/api"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// recorded is an answer as a gateway gave it, served without a network.
type recorded struct {
	status int
	header map[string]string
	body   string

	got []byte // the request body the "gateway" received
}

func (a *recorded) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		a.got, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	h := http.Header{}
	for k, v := range a.header {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body)),
		ContentLength: int64(len(a.body)), Request: req}, nil
}

const (
	base    = "http://127.0.0.1:8080"
	orderID = "o_9f86d081a1b2c3d4e5f60718"
	reqID   = "01JNX4Q7W0C7S2V9D8E6F5G4H3"
)

func jsonAnswer(status int, body string, extra ...string) *recorded {
	h := map[string]string{"Content-Type": "application/json", "X-Request-Id": reqID}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return &recorded{status: status, header: h, body: body + "\n"}
}

func newRequest(t *testing.T, method, path, body string, header ...string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// exchange sends req through v's transport to answer and returns what was
// reported and the answer's body as the client reads it.
func exchange(t *testing.T, v *Validator, req *http.Request, answer *recorded) ([]string, string) {
	t.Helper()
	rec := &recorder{TB: t}
	resp, err := (&http.Client{Transport: v.Transport(rec, answer)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.reported(), string(body)
}

func defaultValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const orderBody = `{"sku":"tshirt-42","qty":2,"customer_id":"alice"}`

// Answers as the gateway gives them conform, and both bodies reach their
// reader whole.
func TestConformingExchanges(t *testing.T) {
	v := defaultValidator(t)
	order := func() *http.Request {
		return newRequest(t, http.MethodPost, "/v1/orders", orderBody,
			"Content-Type", "application/json", "Idempotency-Key", "checkout-7f3a")
	}
	admin := func(method, path, body string) *http.Request {
		return newRequest(t, method, path, body, "Authorization", "Bearer surge-admin")
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		answer *recorded
	}{
		{"accepted", order(), jsonAnswer(202,
			`{"order_id":"`+orderID+`","status":"accepted","sku":"tshirt-42","qty":2}`, "Location", "/v1/orders/"+orderID)},
		{"sold out", order(), jsonAnswer(409, `{"error":{"code":"sold_out","message":"not enough units left for this order"}}`)},
		{"rate limited", order(), jsonAnswer(429, `{"error":{"code":"rate_limited","message":"too many requests"}}`,
			"Retry-After", "2", "RateLimit-Policy", `"customer";q=40;w=2`, "RateLimit", `"customer";r=0;t=2`)},
		{"unavailable", order(), jsonAnswer(503, `{"error":{"code":"unavailable","message":"retry later"}}`, "Retry-After", "1")},
		{"outcome unknown", order(), jsonAnswer(503,
			`{"error":{"code":"outcome_unknown","message":"may be taken"},"order_id":"`+orderID+`"}`, "Retry-After", "2")},
		{"order invoiced", newRequest(t, http.MethodGet, "/v1/orders/"+orderID, ""), jsonAnswer(200,
			`{"order_id":"`+orderID+`","status":"invoiced","sku":"tshirt-42","qty":2,"invoice_id":7}`)},
		{"order rejected", newRequest(t, http.MethodGet, "/v1/orders/"+orderID, ""), jsonAnswer(200,
			`{"order_id":"`+orderID+`","status":"rejected","sku":"tshirt-42","qty":2,"reason":"sold_out_after_acceptance"}`)},
		{"stock load", admin(http.MethodPut, "/v1/admin/stock/tshirt-42", `{"stock":100,"name":"T-shirt","price_cents":1999}`),
			jsonAnswer(200, `{"sku":"tshirt-42","mysql":{"sku":"tshirt-42","name":"T-shirt","price_cents":1999,"stock":100,"sold":0},`+
				`"redis":{"sku":"tshirt-42","loaded":true,"stock":100,"avail":100,"sold":0,"reserved":0},"consistent":true}`)},
		{"no token", newRequest(t, http.MethodGet, "/v1/admin/dlq", ""), jsonAnswer(401,
			`{"error":{"code":"unauthorized","message":"a valid admin bearer token is required"}}`,
			"WWW-Authenticate", `Bearer realm="surge-admin"`)},
		{"reconcile busy", admin(http.MethodPost, "/v1/admin/reconcile", ""), jsonAnswer(409,
			`{"error":{"code":"conflict","message":"busy"},"report":{"started_at":"2026-03-01T10:00:00Z",`+
				`"finished_at":"2026-03-01T10:00:01Z","dry_run":false,"summary":{"busy":1},`+
				`"skus":[{"sku":"tshirt-42","outcome":"busy","attempts":0}],"exit_code":3}}`)},
		{"not ready", newRequest(t, http.MethodGet, "/readyz", ""), jsonAnswer(503, `{"redis":"ok","rabbitmq":"unavailable"}`)},
		{"engines, detailed", admin(http.MethodGet, "/v1/admin/readyz", ""), jsonAnswer(503,
			`{"redis":"ok","rabbitmq":"ok","mysql":"down: dial tcp 127.0.0.1:3306: connect: connection refused"}`)},
		{"metrics", newRequest(t, http.MethodGet, "/metrics", ""), &recorded{status: 200, body: "# TYPE up gauge\nup 1\n",
			header: map[string]string{"Content-Type": "text/plain; version=0.0.4; charset=utf-8", "X-Request-Id": reqID}}},
		{"document", newRequest(t, http.MethodGet, "/openapi.yaml", "", "X-Request-Id", "my.id:1"), &recorded{status: 200,
			body: string(api.OpenAPI), header: map[string]string{"Content-Type": "application/yaml", "X-Request-Id": "my.id:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent []byte
			if tc.req.GetBody != nil {
				b, _ := tc.req.GetBody()
				sent, _ = io.ReadAll(b)
			}
			errs, body := exchange(t, v, tc.req, tc.answer)
			if len(errs) > 0 {
				t.Fatalf("reported: %s", strings.Join(errs, "\n"))
			}
			if string(tc.answer.got) != string(sent) {
				t.Errorf("the gateway got the body %q, want %q", tc.answer.got, sent)
			}
			if body != tc.answer.body {
				t.Errorf("the client read %q, want %q", body, tc.answer.body)
			}
		})
	}
}

// withSchemaChange is the contract with one schema field changed.
func withSchemaChange(t *testing.T, change func(doc *openapi3.T)) *Validator {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	change(doc)
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A recorded answer that conforms to the contract fails against a copy of
// it whose ProductView says "available" is a string: the validator reads
// the schema, and reports the field.
func TestWrongSchemaIsReported(t *testing.T) {
	product := func() (*http.Request, *recorded) {
		return newRequest(t, http.MethodGet, "/v1/products/tshirt-42", ""),
			jsonAnswer(200, `{"sku":"tshirt-42","name":"T-shirt","price_cents":1999,"available":98}`)
	}
	req, answer := product()
	if errs, _ := exchange(t, defaultValidator(t), req, answer); len(errs) != 0 {
		t.Fatalf("against api/openapi.yaml: %s", strings.Join(errs, "\n"))
	}
	wrong := withSchemaChange(t, func(doc *openapi3.T) {
		available := doc.Components.Schemas["ProductView"].Value.Properties["available"].Value
		available.Type, available.Min = &openapi3.Types{openapi3.TypeString}, nil
		// Examples are validated with the document: the answer's changes too.
		available.Example = "98"
		doc.Paths.Value("/v1/products/{sku}").Get.Responses.Status(200).Value.Content.Get("application/json").Example =
			map[string]any{"sku": "tshirt-42", "name": "T-shirt", "price_cents": 1999, "available": "98"}
	})
	req, answer = product()
	errs, _ := exchange(t, wrong, req, answer)
	if len(errs) != 1 || !strings.Contains(errs[0], `answered 200: answer does not conform`) ||
		!strings.Contains(errs[0], `"/available"`) || !strings.Contains(errs[0], "GET /v1/products/{sku}") {
		t.Fatalf("against a copy with available a string: reported %q, want one error on /available", errs)
	}
	t.Logf("reported, as it should be: %s", errs[0])
}

// What does not conform is reported, request or answer, once.
func TestNonConformingIsReported(t *testing.T) {
	v := defaultValidator(t)
	order := func(header ...string) *http.Request {
		return newRequest(t, http.MethodPost, "/v1/orders", orderBody, append([]string{"Idempotency-Key", "k"}, header...)...)
	}
	accepted := func(extra ...string) *recorded {
		return jsonAnswer(202, `{"order_id":"`+orderID+`","status":"accepted","sku":"tshirt-42","qty":2}`,
			append([]string{"Location", "/v1/orders/" + orderID}, extra...)...)
	}
	for _, tc := range []struct {
		name   string
		req    *http.Request
		answer *recorded
		want   string
	}{
		{"no Location", order(), jsonAnswer(202, `{"order_id":"`+orderID+`","status":"accepted","sku":"tshirt-42","qty":2}`),
			`response header "Location" missing`},
		{"no X-Request-Id", order(), &recorded{status: 409, header: map[string]string{"Content-Type": "application/json"},
			body: `{"error":{"code":"sold_out","message":"gone"}}`}, `response header "X-Request-Id" missing`},
		{"malformed X-Request-Id", order(), accepted("X-Request-Id", "a b"), `response header "X-Request-Id" doesn't match schema`},
		{"undocumented status", order(), jsonAnswer(418, `{"error":{"code":"sold_out","message":"teapot"}}`), "status is not supported"},
		{"wrong code for the status", order(), jsonAnswer(409, `{"error":{"code":"conflict","message":"no"}}`), `"/error/code"`},
		{"order_id beside unavailable", order(), jsonAnswer(503,
			`{"error":{"code":"unavailable","message":"x"},"order_id":"`+orderID+`"}`, "Retry-After", "1"),
			`property "order_id" is unsupported`},
		{"503 without Retry-After", order(), jsonAnswer(503, `{"error":{"code":"unavailable","message":"x"}}`),
			`response header "Retry-After" missing`},
		{"429 without RateLimit", order(), jsonAnswer(429, `{"error":{"code":"rate_limited","message":"x"}}`,
			"Retry-After", "1", "RateLimit-Policy", `"customer";q=40;w=2`), `response header "RateLimit" missing`},
		{"extra field", newRequest(t, http.MethodGet, "/v1/products/tshirt-42", ""),
			jsonAnswer(200, `{"sku":"tshirt-42","name":"T","price_cents":1,"available":1,"stock":9}`), `"stock"`},
		{"two JSON values", newRequest(t, http.MethodGet, "/healthz", ""), jsonAnswer(200, `{"status":"ok"}{}`),
			"not a single JSON value"},
		{"no Idempotency-Key", newRequest(t, http.MethodPost, "/v1/orders", orderBody), accepted(),
			`request does not conform: parameter "Idempotency-Key" in header has an error: value is required but missing`},
		{"unknown field sent", newRequest(t, http.MethodPost, "/v1/orders", `{"sku":"a","qty":1,"customer_id":"c","coupon":"x"}`,
			"Idempotency-Key", "k"), accepted(), `"coupon"`},
		{"form body", order("Content-Type", "application/x-www-form-urlencoded"), accepted(), "request does not conform"},
		{"unknown route", newRequest(t, http.MethodDelete, "/v1/orders/"+orderID, ""), jsonAnswer(200, `{}`),
			"not an operation of the document"},
		{"unknown path", newRequest(t, http.MethodGet, "/v1/order", ""), jsonAnswer(200, `{}`), "not an operation of the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, _ := exchange(t, v, tc.req, tc.answer)
			if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Fatalf("reported %q, want one error containing %q", errs, tc.want)
			}
		})
	}
}

// A request marked Invalid is sent as it is, its violation is not
// reported, its answer is validated; a marked request that conforms is
// reported.
func TestInvalidRequests(t *testing.T) {
	v := defaultValidator(t)
	bad := func() *http.Request {
		return Invalid(newRequest(t, http.MethodPost, "/v1/orders", `{"sku":"a","qty":0,"customer_id":"c"}`, "Idempotency-Key", "k"))
	}
	refused := jsonAnswer(400, `{"error":{"code":"invalid_request","message":"qty must be an integer between 1 and 1000"}}`)
	errs, _ := exchange(t, v, bad(), refused)
	if len(errs) != 0 {
		t.Fatalf("a marked request and a conforming answer: reported %q", errs)
	}
	if string(refused.got) != `{"sku":"a","qty":0,"customer_id":"c"}` {
		t.Fatalf("the gateway got %q", refused.got)
	}
	errs, _ = exchange(t, v, bad(), jsonAnswer(400, `{"error":{"code":"invalid","message":"no"}}`))
	if len(errs) != 1 || !strings.Contains(errs[0], "answered 400: answer does not conform") {
		t.Fatalf("a marked request and a wrong answer: reported %q, want the answer", errs)
	}
	good := Invalid(newRequest(t, http.MethodPost, "/v1/orders", orderBody, "Idempotency-Key", "k"))
	errs, _ = exchange(t, v, good, jsonAnswer(409, `{"error":{"code":"sold_out","message":"gone"}}`))
	if len(errs) != 1 || !strings.Contains(errs[0], "marked apitest.Invalid conforms") {
		t.Fatalf("a marked request that conforms: reported %q", errs)
	}
}
