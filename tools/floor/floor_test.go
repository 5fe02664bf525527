package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/order"
)

// soldOut is a gateway whose every SKU is sold out: RefuseSoldOut answers
// a valid order sold out, as gateway.Service does from a read of the SKU;
// Accept checks the key and the order as the service does before any
// engine, then refuses.
type soldOut struct{}

var _ httpapi.Acceptor = soldOut{}

func (soldOut) RefuseSoldOut(_ context.Context, o order.Order, key string) error {
	if order.ValidateIdempotencyKey(key) != nil || o.Validate() != nil {
		return nil
	}
	return fmt.Errorf("no unit left as of a read made for this request: %w", order.ErrSoldOut)
}

func (soldOut) Accept(_ context.Context, o order.Order, key string) (gateway.Accepted, error) {
	if err := order.ValidateIdempotencyKey(key); err != nil {
		return gateway.Accepted{}, err
	}
	if err := o.Validate(); err != nil {
		return gateway.Accepted{}, err
	}
	return gateway.Accepted{}, fmt.Errorf("reserve sku=%s: %w", o.SKU, order.ErrSoldOut)
}

func (soldOut) Refused(_ context.Context, _ order.Order, _ string, cause error) error { return cause }

// gatewayHandler is the gateway's HTTP layer as the services mount it
// (request ids around the public routes), over the sold-out gateway.
func gatewayHandler() http.Handler {
	return httpapi.RequestIDs((&httpapi.Server{Orders: soldOut{}}).Handler())
}

type answer struct {
	status  int
	headers []string
	body    string
	code    string
}

func post(t *testing.T, h http.Handler, body, key string) answer {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{status: rec.Code, body: rec.Body.String()}
	for name := range rec.Header() {
		a.headers = append(a.headers, name)
	}
	slices.Sort(a.headers)
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("answer %d is not the error shape: %v: %q", rec.Code, err, a.body)
	}
	a.code = e.Error.Code
	return a
}

// The floor answers what the gateway's HTTP layer answers when the SKU is
// sold out: the same status, headers and body for the benchmark's orders,
// and the same status and code for what the gateway refuses before it.
func TestFloorAnswersAsTheGatewayDoesWhenSoldOut(t *testing.T) {
	good := `{"sku":"flash-1","qty":1,"customer_id":"lg01-7"}`
	for _, tc := range []struct {
		name, body, key string
		status          int
		code            string
	}{
		{"an order", good, "k7", http.StatusConflict, "sold_out"},
		{"fields in another order", `{"customer_id":"c","qty":2,"sku":"s"}`, "k", http.StatusConflict, "sold_out"},
		{"unknown field", `{"sku":"s","qty":1,"customer_id":"c","coupon":"x"}`, "k", http.StatusBadRequest, "invalid_request"},
		{"over 4 KiB", `{"sku":"s","qty":1,"customer_id":"` + strings.Repeat("c", httpapi.MaxBodyBytes) + `"}`, "k",
			http.StatusRequestEntityTooLarge, "body_too_large"},
		{"two objects", good + good, "k", http.StatusBadRequest, "invalid_request"},
		{"trailing data", good + ` x`, "k", http.StatusBadRequest, "invalid_request"},
		{"empty body", ``, "k", http.StatusBadRequest, "invalid_request"},
		{"qty as a string", `{"sku":"s","qty":"1","customer_id":"c"}`, "k", http.StatusBadRequest, "invalid_request"},
		{"no qty", `{"sku":"s","customer_id":"c"}`, "k", http.StatusBadRequest, "invalid_request"},
		{"qty 0", `{"sku":"s","qty":0,"customer_id":"c"}`, "k", http.StatusBadRequest, "invalid_request"},
		{"sku with a brace", `{"sku":"{s}","qty":1,"customer_id":"c"}`, "k", http.StatusBadRequest, "invalid_request"},
		{"no Idempotency-Key", good, "", http.StatusBadRequest, "invalid_request"},
		{"Idempotency-Key too long", good, strings.Repeat("k", order.MaxIdemKeyLen+1), http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, fl := post(t, gatewayHandler(), tc.body, tc.key), post(t, Handler(), tc.body, tc.key)
			if gw.status != tc.status || gw.code != tc.code {
				t.Fatalf("gateway answered %d %s, the case wants %d %s", gw.status, gw.code, tc.status, tc.code)
			}
			if fl.status != gw.status || fl.code != gw.code {
				t.Errorf("floor answered %d %s, the gateway %d %s", fl.status, fl.code, gw.status, gw.code)
			}
			if !slices.Equal(fl.headers, gw.headers) {
				t.Errorf("floor's headers %v, the gateway's %v", fl.headers, gw.headers)
			}
			if gw.status == http.StatusConflict && fl.body != gw.body {
				t.Errorf("floor's body %q, the gateway's %q", fl.body, gw.body)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Header().Get(httpapi.HeaderRequestID) == "" {
		t.Fatalf("healthz: %d, headers %v", rec.Code, rec.Header())
	}
}
