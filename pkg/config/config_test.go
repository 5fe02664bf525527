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
	if err := config.Load(&cfg); err == nil || !strings.Contains(err.Error(), "SURGE_IDEMPOTENCY_TTL=500ms") {
		t.Fatalf("load: %v, want SURGE_IDEMPOTENCY_TTL refused", err)
	}
}

// TestLoadRejectsIdempotencyTTLInsideARetryHorizon: a 503
// outcome_unknown tells the client to retry after 2s. Were the record
// (and the window that names the order) shorter than that, the retry would
// name a new order and one purchase could be invoiced twice. The floor is
// twice the longest horizon, named in the error.
func TestLoadRejectsIdempotencyTTLInsideARetryHorizon(t *testing.T) {
	var cfg struct{ config.Common }
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "1s")
	err := config.Load(&cfg)
	if err == nil || !strings.Contains(err.Error(), "SURGE_IDEMPOTENCY_TTL=1s: must be at least 4s") {
		t.Fatalf("load: %v, want SURGE_IDEMPOTENCY_TTL=1s refused, naming the floor 4s", err)
	}
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "4s")
	if err := config.Load(&cfg); err != nil {
		t.Fatalf("4s: %v", err)
	}
}

// TestIdempotencyFloorNamesTheLongestHorizon: the floor is derived from
// every horizon a program announces, the reconciler's grace among them.
func TestIdempotencyFloorNamesTheLongestHorizon(t *testing.T) {
	grace := config.Horizon{Name: "SURGE_RECONCILE_GRACE", After: 5 * time.Minute}
	floor, longest := config.IdempotencyFloor(grace)
	if floor != 10*time.Minute || longest != grace {
		t.Fatalf("floor %v from %+v, want 10m from the grace", floor, longest)
	}
	err := config.CheckIdempotencyTTL(6*time.Minute, grace)
	if err == nil || !strings.Contains(err.Error(), "must be at least 10m0s") || !strings.Contains(err.Error(), "SURGE_RECONCILE_GRACE") {
		t.Fatalf("check 6m: %v, want refused naming the floor and the grace", err)
	}
	if err := config.CheckIdempotencyTTL(10*time.Minute, grace); err != nil {
		t.Fatalf("check 10m: %v", err)
	}
}
