// Package ceiling measures the raw throughput of the engines surge stands
// on, on the machine at hand: the reserve script by EVALSHA on one SKU,
// confirmed persistent publishes to a quorum queue, and batched invoice
// inserts. The benchmark compares surge's own rates with these ceilings.
package ceiling

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one ceiling.
type Result struct {
	// Name says what was measured, e.g. "redis_evalsha".
	Name string `json:"name"`
	// Workers is how many goroutines drove the engine.
	Workers int `json:"workers"`
	// Ops counts completed operations (rows for inserts).
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_s"`
	// Setup describes the parameters (batch size, window, ...).
	Setup string `json:"setup"`
}

// op performs one unit of work for worker w and returns how many
// operations it completed.
type op func(ctx context.Context, w int, i int64) (int, error)

// drive runs workers goroutines calling fn until d has passed, and
// returns the operations completed per second. The first error stops the
// run and is returned.
func drive(ctx context.Context, name string, workers int, d time.Duration, fn op) (Result, error) {
	if workers < 1 || d <= 0 {
		return Result{}, fmt.Errorf("%s: need workers >= 1 and a positive duration, got %d and %v", name, workers, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var ops atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			for i := int64(0); ctx.Err() == nil && time.Now().Before(deadline); i++ {
				n, err := fn(ctx, w, i)
				if err != nil {
					cancel(err)
					return
				}
				ops.Add(int64(n))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return Result{}, fmt.Errorf("%s: %w", name, err)
	}
	n := ops.Load()
	return Result{Name: name, Workers: workers, Ops: n, Seconds: round(elapsed.Seconds()),
		PerSec: math.Round(float64(n) / elapsed.Seconds())}, nil
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }
