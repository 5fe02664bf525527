package queue

import (
	"log/slog"
	"reflect"
	"testing"
	"time"
)

// sameFunc tells whether a and b are the same function.
func sameFunc(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }

func fixedNow() time.Time { return time.Unix(1, 0) }

func TestDialOptionsDefaults(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name string
		in   DialOptions
		want DialOptions
	}{
		{"zero", DialOptions{}, DialOptions{Name: "surge", DialTimeout: 5 * time.Second,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Logger: slog.Default()}},
		{"set", DialOptions{Name: "n", DialTimeout: time.Second, MinBackoff: time.Millisecond,
			MaxBackoff: time.Minute, Logger: quiet}, DialOptions{Name: "n", DialTimeout: time.Second,
			MinBackoff: time.Millisecond, MaxBackoff: time.Minute, Logger: quiet}},
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

func TestPublisherOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   PublisherOptions
		want PublisherOptions
	}{
		{"zero", PublisherOptions{}, PublisherOptions{Channels: 8, ConfirmTimeout: 2 * time.Second, Now: time.Now,
			InFlight: 4, MaxBatch: MaxBatch}},
		{"set", PublisherOptions{Channels: 1, ConfirmTimeout: time.Second, Now: fixedNow, InFlight: 1, MaxBatch: 1},
			PublisherOptions{Channels: 1, ConfirmTimeout: time.Second, Now: fixedNow, InFlight: 1, MaxBatch: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.setDefaults()
			if !sameFunc(got.Now, tt.want.Now) {
				t.Fatal("Now is not the expected function")
			}
			got.Now, tt.want.Now = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if err := (PublisherOptions{Channels: -1}).validate(); err == nil {
		t.Error("a negative pool size was accepted")
	}
	if err := (PublisherOptions{MaxBatch: MaxBatch + 1}).validate(); err == nil {
		t.Error("a batch bound over MaxBatch was accepted")
	}
	if err := (PublisherOptions{InFlight: -1}).validate(); err == nil {
		t.Error("a negative in-flight count was accepted")
	}
}

func TestConsumerOptionsDefaults(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name string
		in   ConsumerOptions
		want ConsumerOptions
	}{
		{"zero", ConsumerOptions{}, ConsumerOptions{Prefetch: 64, Concurrency: 16, DrainTimeout: 30 * time.Second,
			Logger: slog.Default(), Now: time.Now}},
		{"set", ConsumerOptions{Prefetch: 1, Concurrency: 2, DrainTimeout: time.Second, Logger: quiet, Now: fixedNow},
			ConsumerOptions{Prefetch: 1, Concurrency: 2, DrainTimeout: time.Second, Logger: quiet, Now: fixedNow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.setDefaults()
			if !sameFunc(got.Now, tt.want.Now) {
				t.Fatal("Now is not the expected function")
			}
			got.Now, tt.want.Now = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if err := (ConsumerOptions{Prefetch: 65536, Concurrency: 1}).validate(); err == nil {
		t.Error("a prefetch over 65535 was accepted")
	}
}
