package gateway

import (
	"log/slog"
	"testing"
	"time"
)

// New gives a Service's zero fields their defaults and keeps set ones.
func TestNewSetsDefaults(t *testing.T) {
	s := New(Service{})
	if s.Now == nil || s.CleanupTimeout != 2*time.Second || s.Log != slog.Default() {
		t.Errorf("zero Service: Now set %v, CleanupTimeout %v, Log default %v; want time.Now, 2s, slog.Default()",
			s.Now != nil, s.CleanupTimeout, s.Log == slog.Default())
	}
	at := time.Unix(1700000000, 0)
	log := slog.New(slog.DiscardHandler)
	s = New(Service{Now: func() time.Time { return at }, CleanupTimeout: time.Second, Log: log})
	if !s.Now().Equal(at) || s.CleanupTimeout != time.Second || s.Log != log {
		t.Errorf("set fields changed: Now %v, CleanupTimeout %v, Log kept %v", s.Now(), s.CleanupTimeout, s.Log == log)
	}
}
