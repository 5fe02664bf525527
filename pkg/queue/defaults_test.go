package queue

import (
	"log/slog"
	"testing"
	"time"
)

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
