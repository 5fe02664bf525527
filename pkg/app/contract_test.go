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
	get := func(path string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
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
	if code, body := get("/openapi.yaml"); code != http.StatusOK || !bytes.Equal(body, api.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want 200 and api/openapi.yaml (%d bytes)", code, len(body), len(api.OpenAPI))
	}
	for _, tc := range []struct {
		path   string
		header []string
		status int
	}{
		{"/healthz", nil, http.StatusOK},
		{"/readyz", nil, http.StatusOK},
		{"/v1/admin/stock/" + sku, []string{"Authorization", "Bearer " + p.Token}, http.StatusOK},
		{"/v1/admin/stock/" + testenv.Unique("nosuch-"), []string{"Authorization", "Bearer " + p.Token}, http.StatusNotFound},
		{"/v1/admin/stock/" + sku, []string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{"/v1/products/" + testenv.Unique("nosuch-"), nil, http.StatusNotFound},
		{"/v1/orders/o_" + strings.Repeat("0", 24), nil, http.StatusNotFound},
		{"/v1/admin/dlq", []string{"Authorization", "Bearer " + p.Token, "X-Request-Id", "contract-test:1"}, http.StatusOK},
	} {
		if code, body := get(tc.path, tc.header...); code != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.path, code, body, tc.status)
		}
	}
}
