package profile

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesProfiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("status %d, body %.80q: want the goroutine profile", resp.StatusCode, body)
	}
}

func TestServeWithoutAddressServesNothing(t *testing.T) {
	if err := Serve(context.Background(), "", slog.Default()); err != nil {
		t.Fatal(err)
	}
	if err := Serve(context.Background(), "256.0.0.1:1", slog.Default()); err == nil {
		t.Fatal("listening on an impossible address succeeded")
	}
}
