package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/cache"
	"surge/pkg/keys"
)

// Unknown ids are cached as misses for MissTTL (plus the stale window).
func TestMissesAreCached(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "nope")
	src := newSource("", 0)
	src.err = fmt.Errorf("read product: %w", cache.ErrNotFound)
	c := newCache(t, rdb, ns, src, cache.Options{MissTTL: 2 * time.Second, Stale: time.Second})
	ctx := context.Background()
	for range 3 {
		if _, err := c.Get(ctx, "nope"); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("get unknown id: %v, want ErrNotFound", err)
		}
	}
	if n := src.loads.Load(); n != 1 {
		t.Fatalf("%d loads for a cached miss, want 1", n)
	}
	// MissTTL with up to 10% jitter, plus the stale window.
	if ttl := rdb.PTTL(ctx, keys.Cache(ns, "nope")).Val(); ttl <= 0 || ttl > 3200*time.Millisecond {
		t.Fatalf("miss kept for %v, want at most MissTTL*1.1 + Stale", ttl)
	}
}

// A failing loader's error reaches the caller, nothing is cached, and the
// lease is freed so the next reader rebuilds at once.
func TestLoadErrorIsNotCached(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "x")
	ctx := context.Background()
	boom := errors.New("mysql down")
	bad := newSource("", 0)
	bad.err = boom
	if _, err := newCache(t, rdb, ns, bad, cache.Options{}).Get(ctx, "x"); !errors.Is(err, boom) {
		t.Fatalf("get with a failing loader: %v, want its error", err)
	}
	if n := rdb.Exists(ctx, keys.Cache(ns, "x"), keys.CacheLease(ns, "x")).Val(); n != 0 {
		t.Fatalf("%d keys left after a failed load, want none", n)
	}
	good := newSource("ok", 0)
	v, err := newCache(t, rdb, ns, good, cache.Options{Wait: 50 * time.Millisecond}).Get(ctx, "x")
	if err != nil || string(v) != "ok" {
		t.Fatalf("get after the failure: %q, %v", v, err)
	}
}

// A reader with no value gives up with ErrBusy when another rebuild holds
// the lease past Wait, and takes over once that lease expires.
func TestWaitForAnotherRebuild(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "x")
	ctx := context.Background()
	src := newSource("v", 0)
	if err := rdb.Set(ctx, keys.CacheLease(ns, "x"), "other-process", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := newCache(t, rdb, ns, src, cache.Options{Wait: 100 * time.Millisecond}).Get(ctx, "x"); !errors.Is(err, cache.ErrBusy) {
		t.Fatalf("get while another rebuild runs: %v, want ErrBusy", err)
	}
	// The other rebuilder died: its lease runs out, and a waiter takes over.
	if err := rdb.PExpire(ctx, keys.CacheLease(ns, "x"), 200*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := newCache(t, rdb, ns, src, cache.Options{Wait: 30 * time.Second}).Get(ctx, "x")
	if err != nil || string(v) != "v" || src.loads.Load() != 1 {
		t.Fatalf("get after the lease ran out: %q, %v, %d loads", v, err, src.loads.Load())
	}
}

// XFetch: a fresh entry is refreshed early when the draw says so
// (-delta*beta*ln(r) reaches past its expiry), and not otherwise.
func TestEarlyRefresh(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "x")
	ctx := context.Background()
	src := newSource("v1", 20*time.Millisecond) // delta >= 20ms
	opts := func(r float64) cache.Options {
		return cache.Options{TTL: time.Second, Jitter: -1, Rand: func() float64 { return r }}
	}
	if _, err := newCache(t, rdb, ns, src, opts(0.5)).Get(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	src.value.Store("v2")
	for _, tt := range []struct {
		r     float64
		loads int32
	}{
		{0.99, 1},   // gap 20ms*0.01: far from expiry
		{1e-300, 2}, // gap 20ms*690 = 13.8s: past expiry
	} {
		c := newCache(t, rdb, ns, src, opts(tt.r))
		v, err := c.Get(ctx, "x")
		if err != nil || string(v) != "v1" {
			t.Fatalf("r=%g: got %q, %v; want the cached v1 at once", tt.r, v, err)
		}
		c.Close()
		if n := src.loads.Load(); n != tt.loads {
			t.Fatalf("r=%g: %d loads, want %d", tt.r, n, tt.loads)
		}
	}
	v, _ := newCache(t, rdb, ns, src, opts(0.99)).Get(ctx, "x")
	if string(v) != "v2" {
		t.Fatalf("after the early refresh: %q, want v2", v)
	}
}

// Update rewrites a cached value in place (no load), leaves missing
// entries and misses alone; Invalidate makes the next Get load.
func TestUpdateAndInvalidate(t *testing.T) {
	rdb := testenv.Redis(t)
	ns := namespace(t, rdb, "x", "absent", "nope")
	ctx := context.Background()
	src := newSource("a", 0)
	c := newCache(t, rdb, ns, src, cache.Options{})
	if _, err := c.Get(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	appendB := func(old []byte) ([]byte, error) { calls.Add(1); return append(old, 'b'), nil }
	if ok, err := c.Update(ctx, "x", appendB); !ok || err != nil {
		t.Fatalf("update cached: %v, %v", ok, err)
	}
	if v, err := c.Get(ctx, "x"); string(v) != "ab" || err != nil || src.loads.Load() != 1 {
		t.Fatalf("after update: %q, %v, %d loads; want ab without a load", v, err, src.loads.Load())
	}
	if ok, err := c.Update(ctx, "absent", appendB); ok || err != nil {
		t.Fatalf("update missing: %v, %v; want false", ok, err)
	}
	if n := rdb.Exists(ctx, keys.Cache(ns, "absent")).Val(); n != 0 {
		t.Fatal("update created a missing entry")
	}
	src.err = cache.ErrNotFound
	_, _ = c.Get(ctx, "nope")
	if ok, err := c.Update(ctx, "nope", appendB); ok || err != nil {
		t.Fatalf("update a cached miss: %v, %v; want false", ok, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("fn called %d times, want once", calls.Load())
	}
	src.err = nil
	src.value.Store("c")
	if err := c.Invalidate(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "x"); string(v) != "c" || err != nil {
		t.Fatalf("after invalidate: %q, %v; want a fresh load", v, err)
	}
}
