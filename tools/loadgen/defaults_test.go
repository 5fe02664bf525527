package loadgen

import (
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Options
		want Options
	}{
		{"zero", Options{}, Options{Concurrency: 64, Timeout: 10 * time.Second, SlowAfter: 5 * time.Millisecond}},
		{"set", Options{Concurrency: 2, Requests: 3, Duration: time.Second, Rate: 4, Timeout: time.Minute,
			SlowAfter: time.Millisecond}, Options{Concurrency: 2, Requests: 3, Duration: time.Second, Rate: 4,
			Timeout: time.Minute, SlowAfter: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.setDefaults()
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewOrdersDefaults(t *testing.T) {
	tests := []struct {
		name    string
		qty     int
		wantQty int
	}{
		{"zero", 0, 1},
		{"negative", -2, 1},
		{"set", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOrders(Orders{SKU: "s", RunID: "r", Qty: tt.qty})
			if o.Qty != tt.wantQty || o.SKU != "s" || o.RunID != "r" {
				t.Fatalf("got %+v, want qty %d and the fields kept", o, tt.wantQty)
			}
		})
	}
}

func TestScenarioDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
		want time.Duration
	}{
		{"zero", 0, time.Minute},
		{"negative", -time.Second, time.Minute},
		{"set", time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Scenario{Label: "l", DrainTimeout: tt.in}
			s.setDefaults()
			if s.DrainTimeout != tt.want || s.Label != "l" {
				t.Fatalf("got drain timeout %v label %q, want %v and the label kept", s.DrainTimeout, s.Label, tt.want)
			}
		})
	}
}
