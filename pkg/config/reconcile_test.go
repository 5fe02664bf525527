package config_test

import (
	"testing"
	"time"

	"surge/pkg/config"
)

func TestReconcileSectionKeepsPlainNames(t *testing.T) {
	var cfg struct {
		config.Common
		config.Reconcile
	}
	t.Setenv("SURGE_RECONCILE_GRACE", "90s")
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Grace != 90*time.Second || cfg.Lookback != 15*time.Minute {
		t.Fatalf("grace %v lookback %v, want 1m30s and the 15m default", cfg.Grace, cfg.Lookback)
	}
}
