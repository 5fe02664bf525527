package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTopologyDefaults(t *testing.T) {
	got := Topology{}.WithDefaults()
	want := Topology{
		Exchange: "orders", RoutingKey: "order.created", Queue: "orders.created",
		DeadExchange: "orders.dlx", DeadQueue: "orders.dead", RetryExchange: "orders.retry",
		RetryDelays:   []time.Duration{time.Second, 10 * time.Second, time.Minute},
		DeliveryLimit: 20,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"orders.retry.1s", "orders.retry.10s", "orders.retry.60s"}, got.RetryQueues()); diff != "" {
		t.Errorf("retry queues (-want +got):\n%s", diff)
	}
	custom := Topology{Queue: "q", RetryExchange: "r", RetryDelays: []time.Duration{200 * time.Millisecond}}.WithDefaults()
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
			err := Topology{RetryDelays: tt.delays, DeliveryLimit: tt.limit}.WithDefaults().validate()
			if (err == nil) != tt.ok {
				t.Errorf("validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
