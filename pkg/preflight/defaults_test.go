package preflight

import (
	"slices"
	"testing"
	"time"

	"surge/pkg/queue"
)

func TestRabbitOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   RabbitOptions
		want RabbitOptions
	}{
		{"zero", RabbitOptions{}, RabbitOptions{Timeout: 10 * time.Second, Topology: queue.NewTopology(queue.Topology{})}},
		{"set", RabbitOptions{URL: "amqp://x", Timeout: time.Second, Topology: queue.Topology{Queue: "q"}},
			RabbitOptions{URL: "amqp://x", Timeout: time.Second, Topology: queue.NewTopology(queue.Topology{Queue: "q"})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.setDefaults()
			if got.URL != tt.want.URL || got.Timeout != tt.want.Timeout || got.Topology.Queue != tt.want.Topology.Queue ||
				got.Topology.DeadQueue != tt.want.Topology.DeadQueue {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRedisOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   RedisOptions
		want RedisOptions
	}{
		{"zero", RedisOptions{}, RedisOptions{Timeout: 10 * time.Second, ServiceUsers: DefaultServiceUsers}},
		{"set", RedisOptions{Timeout: time.Second, ServiceUsers: []string{"u"}},
			RedisOptions{Timeout: time.Second, ServiceUsers: []string{"u"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.setDefaults()
			if got.Timeout != tt.want.Timeout || !slices.Equal(got.ServiceUsers, tt.want.ServiceUsers) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
