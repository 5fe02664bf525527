package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestEndpointServesUntilCancelled(t *testing.T) {
	ep, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ep.Serve(ctx) }()
	resp, err := http.Get("http://" + ep.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "surge_worker_orders_total") {
		t.Fatalf("GET /metrics: %d, body without surge_worker_orders_total", resp.StatusCode)
	}
	if _, err := Listen(ep.Addr()); err == nil {
		t.Fatal("a second endpoint on a taken port must fail at Listen")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := http.Get("http://" + ep.Addr() + "/metrics"); err == nil {
		t.Fatal("endpoint still answers after its context ended")
	}
}

// TestHealthzFollowsTheCheck: /healthz says ok without a check and while it passes, and 503
// with the check's error while it fails, so a liveness probe restarts a stuck process.
func TestHealthzFollowsTheCheck(t *testing.T) {
	ep, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ep.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + ep.Addr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("no check: %d %s", code, body)
	}
	var failing error
	ep.SetHealth(func() error { return failing })
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("passing check: %d %s", code, body)
	}
	failing = errors.New("not consuming: no subscription to orders.created for 3m0s")
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "no subscription to orders.created") {
		t.Fatalf("failing check: %d %s, want 503 with the error", code, body)
	}
}
