package worker

import (
	"log/slog"
	"testing"
	"time"
)

// New gives a Processor's zero fields their defaults and keeps set ones.
func TestNewSetsDefaults(t *testing.T) {
	p := New(Processor{})
	if p.Timeout != DefaultTimeout || p.Log != slog.Default() {
		t.Errorf("zero Processor: Timeout %v, Log default %v; want %v, slog.Default()", p.Timeout, p.Log == slog.Default(), DefaultTimeout)
	}
	log := slog.New(slog.DiscardHandler)
	p = New(Processor{Timeout: time.Second, Log: log})
	if p.Timeout != time.Second || p.Log != log {
		t.Errorf("set fields changed: Timeout %v, Log kept %v", p.Timeout, p.Log == log)
	}
}
