package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/cache"
)

// A thousand concurrent readers spread over four cache instances (four
// processes, each with its own Redis client) read one expired key while
// the loader is slow: exactly one load happens. With a stale value the
// readers get it at once (or the new one); with none they wait for the
// one rebuild.
func TestStampedeLoadsOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stale bool
	}{{"stale value", true}, {"no value", false}} {
		t.Run(tt.name, func(t *testing.T) {
			rdb := testenv.Redis(t)
			const id = "hot"
			ns := namespace(t, rdb, id)
			ctx := context.Background()
			if tt.stale {
				// Written an hour ago by this clock: past its TTL, inside
				// the stale window Redis keeps it for.
				old := newCache(t, rdb, ns, newSource("v1", 0), cache.Options{
					Now: func() time.Time { return time.Now().Add(-time.Hour) }, Stale: 2 * time.Hour,
				})
				if _, err := old.Get(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			src := newSource("v2", 200*time.Millisecond)
			caches := make([]*cache.Cache, 4)
			for i := range caches {
				caches[i] = newCache(t, testenv.Redis(t), ns, src, cache.Options{Wait: 30 * time.Second})
			}

			const readers = 1000
			var wg sync.WaitGroup
			start := make(chan struct{})
			got := make([]string, readers)
			errs := make([]error, readers)
			for i := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					v, err := caches[i%len(caches)].Get(ctx, id)
					got[i], errs[i] = string(v), err
				}()
			}
			close(start)
			wg.Wait()
			for _, c := range caches {
				c.Close() // waits for background rebuilds
			}
			for i := range readers {
				ok := got[i] == "v2" || (tt.stale && got[i] == "v1")
				if errs[i] != nil || !ok {
					t.Fatalf("reader %d got %q, %v", i, got[i], errs[i])
				}
			}
			if n := src.loads.Load(); n != 1 {
				t.Fatalf("%d loads, want exactly 1", n)
			}
			v, err := newCache(t, rdb, ns, src, cache.Options{}).Get(ctx, id)
			if err != nil || string(v) != "v2" || src.loads.Load() != 1 {
				t.Fatalf("after the rebuild: %q, %v, %d loads; want v2 without a load", v, err, src.loads.Load())
			}
		})
	}
}
