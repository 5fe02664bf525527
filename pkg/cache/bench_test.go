package cache_test

import (
	"context"
	"strings"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/cache"
)

// Cache hits: one HMGET of a 100-byte value, sequentially (latency) and
// from 16 goroutines per CPU (throughput). Run with:
// go test -run '^$' -bench . ./pkg/cache
func BenchmarkGetHit(b *testing.B) {
	rdb := testenv.Redis(b)
	ns := namespace(b, rdb, "hot")
	src := newSource(strings.Repeat("x", 100), 0)
	c := newCache(b, rdb, ns, src, cache.Options{})
	ctx := context.Background()
	if _, err := c.Get(ctx, "hot"); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Get(ctx, "hot"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Get(ctx, "hot"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	if n := src.loads.Load(); n != 1 {
		b.Fatalf("%d loads during hits, want 1", n)
	}
}
