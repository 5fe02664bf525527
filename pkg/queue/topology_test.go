package queue

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
)

func TestTopologyDefaults(t *testing.T) {
	got := NewTopology(Topology{})
	want := Topology{
		Exchange: "orders", RoutingKey: "order.created", Queue: "orders.created",
		DeadExchange: "orders.dlx", DeadQueue: "orders.dead", RetryExchange: "orders.retry",
		RetryDelays:   []time.Duration{time.Second, 10 * time.Second, time.Minute},
		DeliveryLimit: 20, DeadDeliveryLimit: 1_000_000,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"orders.retry.1s", "orders.retry.10s", "orders.retry.60s"}, got.RetryQueues()); diff != "" {
		t.Errorf("retry queues (-want +got):\n%s", diff)
	}
	custom := NewTopology(Topology{Queue: "q", RetryExchange: "r", RetryDelays: []time.Duration{200 * time.Millisecond}})
	if custom.Queue != "q" || custom.Exchange != "orders" || custom.RetryQueues()[0] != "r.200ms" {
		t.Errorf("custom topology = %+v, retry queues %v", custom, custom.RetryQueues())
	}
}

func TestTopologyValidate(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		limit  int
		ok     bool
	}{
		{"defaults", nil, 0, true},
		{"sub-millisecond tier", []time.Duration{time.Microsecond}, 0, false},
		{"same tier twice", []time.Duration{time.Second, 1000 * time.Millisecond}, 0, false},
		{"negative limit", nil, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewTopology(Topology{RetryDelays: tt.delays, DeliveryLimit: tt.limit}).validate()
			if (err == nil) != tt.ok {
				t.Errorf("validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestDeadQueueDeliveryLimit: a new dead queue is declared with an
// explicit delivery limit far out of reach (RabbitMQ 4.0-4.2 count each
// listing's return against a default of 20), and one an earlier version
// declared without it is kept as it is, with a warning naming the policy
// that sets the limit.
func TestDeadQueueDeliveryLimit(t *testing.T) {
	conn := dialTest(t, testenv.AMQPURL(t))
	fresh := testTopology(t, conn)
	declared := func(queue string, args amqp.Table) error {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		_, err = ch.QueueDeclare(queue, true, false, false, false, args)
		return err
	}
	limit := amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(DefaultDeadDeliveryLimit)}
	if err := declared(fresh.DeadQueue, limit); err != nil {
		t.Fatalf("the dead queue lacks the explicit limit: %v", err)
	}

	p := testenv.Unique("t") + "."
	legacy := NewTopology(Topology{Exchange: p + "orders", Queue: p + "orders.created", DeadExchange: p + "orders.dlx",
		DeadQueue: p + "orders.dead", RetryExchange: p + "orders.retry", RetryDelays: []time.Duration{time.Second}})
	if err := declared(legacy.DeadQueue, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { withChannel(t, conn, func(ch *amqp.Channel) { _ = legacy.Delete(ch) }) })
	var logs strings.Builder
	if err := legacy.DeclareOn(conn, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("declare over a dead queue without the limit: %v", err)
	}
	if !strings.Contains(logs.String(), "set_policy") {
		t.Fatalf("no warning naming the policy: %q", logs.String())
	}
	if err := declared(legacy.DeadQueue, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("the old dead queue was changed: %v", err)
	}
}
