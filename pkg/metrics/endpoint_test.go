package metrics

import (
	"context"
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
