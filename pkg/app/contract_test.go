package app_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"surge/api"
	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/pkg/app"
)

// TestContractRoutes: the routes the pipeline tests do not otherwise reach
// answer as api/openapi.yaml says (every exchange goes through the
// validating client), and GET /openapi.yaml serves that document.
func TestContractRoutes(t *testing.T) {
	p := gatewayOnly(t, commonConfig(t), app.GatewayConfig{})
	sku := testenv.Unique("contract-")
	p.loadStock(t, sku, 3)
	c := apitest.Client(t)
	get := func(base, path string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if code, body := get(p.URL, "/openapi.yaml"); code != http.StatusOK || !bytes.Equal(body, api.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want 200 and api/openapi.yaml (%d bytes)", code, len(body), len(api.OpenAPI))
	}
	for _, tc := range []struct {
		base   string
		path   string
		header []string
		status int
	}{
		{p.URL, "/healthz", nil, http.StatusOK},
		{p.URL, "/readyz", nil, http.StatusOK},
		{p.Admin, "/v1/admin/readyz", []string{"Authorization", "Bearer " + p.Token}, http.StatusOK},
		{p.Admin, "/v1/admin/stock/" + sku, []string{"Authorization", "Bearer " + p.Token}, http.StatusOK},
		{p.Admin, "/v1/admin/stock/" + testenv.Unique("nosuch-"), []string{"Authorization", "Bearer " + p.Token}, http.StatusNotFound},
		{p.Admin, "/v1/admin/stock/" + sku, []string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{p.URL, "/v1/products/" + testenv.Unique("nosuch-"), nil, http.StatusNotFound},
		{p.URL, "/v1/orders/o_" + strings.Repeat("0", 24), nil, http.StatusNotFound},
		{p.Admin, "/v1/admin/dlq", []string{"Authorization", "Bearer " + p.Token, "X-Request-Id", "contract-test:1"}, http.StatusOK},
	} {
		if code, body := get(tc.base, tc.path, tc.header...); code != tc.status {
			t.Errorf("GET %s%s: %d %s, want %d", tc.base, tc.path, code, body, tc.status)
		}
	}
}

// TestListenersApart: the public listener serves only the public routes
// (the admin API, /metrics and the console are 404 there, with or without
// the token), and the admin listener only the admin ones.
func TestListenersApart(t *testing.T) {
	p := gatewayOnly(t, commonConfig(t), app.GatewayConfig{})
	sku := testenv.Unique("apart-")
	p.loadStock(t, sku, 2)
	do := func(method, url string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+p.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	adminRoutes := []struct{ method, path string }{
		{http.MethodGet, "/v1/admin/stock/" + sku},
		{http.MethodPut, "/v1/admin/stock/" + sku},
		{http.MethodGet, "/v1/admin/dlq"},
		{http.MethodPost, "/v1/admin/dlq/replay"},
		{http.MethodPost, "/v1/admin/dlq/discard"},
		{http.MethodPost, "/v1/admin/reconcile"},
		{http.MethodGet, "/metrics"},
		{http.MethodGet, "/console/"},
	}
	for _, r := range adminRoutes {
		if code := do(r.method, p.URL+r.path); code != http.StatusNotFound {
			t.Errorf("public %s %s: %d, want 404", r.method, r.path, code)
		}
	}
	for _, path := range []string{"/v1/admin/stock/" + sku, "/v1/admin/dlq", "/metrics"} {
		if code := do(http.MethodGet, p.Admin+path); code != http.StatusOK {
			t.Errorf("admin GET %s: %d, want 200", path, code)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Get(p.Admin + "/console/"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/login") {
		t.Errorf("admin GET /console/ without a session: %d %q, want 303 to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/v1/products/" + sku, "/healthz"} {
		if code := do(http.MethodGet, p.URL+path); code != http.StatusOK {
			t.Errorf("public GET %s: %d, want 200", path, code)
		}
		if code := do(http.MethodGet, p.Admin+path); code != http.StatusNotFound {
			t.Errorf("admin GET %s: %d, want 404", path, code)
		}
	}
}
