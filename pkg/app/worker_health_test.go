package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/app"
)

// TestWorkerHealthzFailsWhileNotConsuming: the worker's /healthz, its liveness probe, says ok
// while it consumes, and 503 once its subscription to the work queue has been gone for longer
// than SURGE_WORKER_LIVENESS_GRACE (here the broker cancelled it: the queue was deleted), so
// a worker that runs but will never process an order is restarted.
func TestWorkerHealthzFailsWhileNotConsuming(t *testing.T) {
	c := commonConfig(t)
	cfg := workerConfig(t, c)
	cfg.MetricsAddr, cfg.LivenessGrace = "127.0.0.1:0", 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	w, err := app.NewWorker(ctx, cfg, quietLog())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	healthz := func() (int, string) {
		resp, err := http.Get("http://" + w.MetricsAddr() + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	poll := func(what string, cond func(int, string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body := healthz()
			if cond(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /healthz still %d %s", what, code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	poll("consuming", func(code int, _ string) bool { return code == http.StatusOK })

	conn, err := amqp.Dial(c.AMQP.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(c.AMQP.Topology().Queue, false, false, false); err != nil {
		t.Fatalf("delete the work queue: %v", err)
	}
	poll("no subscription", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not consuming")
	})
}
