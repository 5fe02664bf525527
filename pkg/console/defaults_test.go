package console

import (
	"log/slog"
	"reflect"
	"testing"
	"time"
)

func TestConsoleDefaults(t *testing.T) {
	fixed := func() time.Time { return time.Unix(1, 0) }
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name    string
		in      Console
		wantLog *slog.Logger
		wantNow func() time.Time
	}{
		{"zero", Console{}, slog.Default(), time.Now},
		{"set", Console{Log: quiet, Now: fixed}, quiet, fixed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.in
			c.setDefaults()
			if c.Log != tt.wantLog || reflect.ValueOf(c.Now).Pointer() != reflect.ValueOf(tt.wantNow).Pointer() {
				t.Fatalf("got log %p now %p, want %p and the given clock", c.Log, c.Now, tt.wantLog)
			}
		})
	}
}
