package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPublicReadyzKeepsDetailInside: with an engine down, the public
// /readyz answers 503 with "unavailable" for it and nothing of the
// driver's error (an internal address, a user name); the admin listener's
// /v1/admin/readyz, behind the token, gives the error.
func TestPublicReadyzKeepsDetailInside(t *testing.T) {
	const internal = "dial tcp 10.20.30.40:6379: connect: connection refused (user surge-gateway)"
	down := func(context.Context) error { return errors.New(internal) }
	up := func(context.Context) error { return nil }
	s := &Server{AdminToken: "tok", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready:      []Check{{Name: "redis", Ping: down}, {Name: "rabbitmq", Ping: up}},
		AdminReady: []Check{{Name: "redis", Ping: down}, {Name: "rabbitmq", Ping: up}, {Name: "mysql", Ping: up}}}
	public := httptest.NewServer(s.Handler())
	defer public.Close()
	adminSrv := httptest.NewServer(s.AdminHandler())
	defer adminSrv.Close()

	get := func(url, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(public.URL+"/readyz", "")
	if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != `{"rabbitmq":"ok","redis":"unavailable"}` {
		t.Errorf("public /readyz: %d %s; want 503 with redis unavailable and nothing more", code, body)
	}
	for _, leak := range []string{"10.20.30.40", "6379", "surge-gateway", "dial tcp", "mysql"} {
		if strings.Contains(body, leak) {
			t.Errorf("public /readyz tells %q: %s", leak, body)
		}
	}
	if code, _ := get(public.URL+"/v1/admin/readyz", "tok"); code != http.StatusNotFound {
		t.Errorf("the public listener answers /v1/admin/readyz: %d, want 404", code)
	}
	code, body = get(adminSrv.URL+"/v1/admin/readyz", "tok")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "10.20.30.40:6379") || !strings.Contains(body, `"mysql":"ok"`) {
		t.Errorf("admin readyz: %d %s; want 503 with the driver's error and mysql", code, body)
	}
}
