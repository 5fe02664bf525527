package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"surge/internal/testenv"
	"surge/pkg/reconcile"
)

// TestServiceRepairsOnSchedule runs the asynq scheduler and server on the
// cluster and waits for a scheduled sweep to repair a lost commit.
func TestServiceRepairsOnSchedule(t *testing.T) {
	e := newEnv(t)
	sku := e.product(10)
	o := ord(sku, 1, 2)
	e.process(o) // Redis lost the order

	rec := e.reconciler(reconcile.Options{})
	queue := testenv.Unique("t.reconcile.")
	t.Cleanup(func() { _ = asynq.NewInspectorFromRedisClient(e.rdb).DeleteQueue(queue, true) })
	svc := reconcile.NewService(e.rdb, rec, reconcile.ServiceOptions{Every: time.Second, Queue: queue, Log: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service run: %v", err)
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for e.state(sku).Sold != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled sweep repaired %s: %+v", sku, e.state(sku))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := e.state(sku, o); s.Avail != 8 || s.States[o.ID] != "C" {
		t.Errorf("after the sweep: %+v, want avail 8 and the order committed", s)
	}
	if n := e.repairs(sku, false); n != 1 {
		t.Errorf("%d repairs recorded, want 1", n)
	}
}
