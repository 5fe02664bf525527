package config_test

import (
	"strings"
	"testing"
	"time"

	"surge/pkg/config"
)

func TestLoadDefaultsAndOverrides(t *testing.T) {
	var cfg struct {
		config.Common
		HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080"`
	}
	t.Setenv("SURGE_REDIS_PASSWORD", "s3cret")
	t.Setenv("SURGE_AMQP_RETRY_DELAYS", "200ms,2s")
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Password != "s3cret" || len(cfg.Redis.Addrs) != 6 {
		t.Fatalf("redis: %+v", cfg.Redis)
	}
	if cfg.HTTPAddr != "127.0.0.1:8080" || cfg.MySQL.DSN != "root@tcp(127.0.0.1:3306)/surge" {
		t.Fatalf("defaults: %q %q", cfg.HTTPAddr, cfg.MySQL.DSN)
	}
	topo := cfg.AMQP.Topology()
	if topo.Exchange != "orders" || len(topo.RetryDelays) != 2 || topo.RetryDelays[0] != 200*time.Millisecond {
		t.Fatalf("topology: %+v", topo)
	}
	if cfg.IdempotencyTTL != 24*time.Hour {
		t.Fatalf("idempotency ttl %v", cfg.IdempotencyTTL)
	}
}

func TestLoadRejectsBadValue(t *testing.T) {
	var cfg struct{ config.Common }
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever")
	if err := config.Load(&cfg); err == nil {
		t.Fatal("want an error for SURGE_IDEMPOTENCY_TTL=forever")
	}
}

// TestLoadRejectsSubSecondIdempotencyTTL: order states expire in whole
// seconds; a shorter TTL made the reserve script fail after it had taken
// the units.
func TestLoadRejectsSubSecondIdempotencyTTL(t *testing.T) {
	var cfg struct{ config.Common }
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "500ms")
	err := config.Load(&cfg)
	if err == nil || !strings.Contains(err.Error(), "SURGE_IDEMPOTENCY_TTL=500ms: must be at least 1s") {
		t.Fatalf("load: %v, want SURGE_IDEMPOTENCY_TTL refused", err)
	}
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "1s")
	if err := config.Load(&cfg); err != nil {
		t.Fatalf("1s: %v", err)
	}
}
