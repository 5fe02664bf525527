//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

const (
	nBuyers      = 24
	maxRetries   = 4                     // a patient buyer's retries with the same key
	hammerPace   = 10 * time.Millisecond // about 100 requests/s from one customer
	clientTimout = 15 * time.Second
)

// workload is the sale's clients: buyers, the hammer, the restocker, the
// status pollers and the Redis sampler, all recording into one history.
type workload struct {
	p      *pipeline
	h      *history
	skus   []string
	run    int
	seed   int64
	client *http.Client

	restockMu sync.Mutex // one restock at a time, so their order is known
	mu        sync.Mutex
	stock     map[string]int // the stock last set per SKU
}

func newWorkload(p *pipeline, h *history, skus []string, stock map[string]int, run int, seed int64) *workload {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &workload{p: p, h: h, skus: skus, run: run, seed: seed, stock: stock,
		client: &http.Client{Timeout: clientTimout, Transport: tr}}
}

func (w *workload) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(w.seed), stream))
}

// start runs every client until the returned stop is called; stop waits
// for the requests in flight to be answered.
func (w *workload) start(dur time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range nBuyers {
		wg.Go(func() { w.buyer(ctx, i) })
	}
	wg.Go(func() { w.hammer(ctx) })
	wg.Go(func() { w.restocker(ctx, dur) })
	for i := range 2 {
		wg.Go(func() { w.poller(ctx, i) })
	}
	wg.Go(func() { w.sampler(ctx) })
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// buyer places orders one after another, each with a new customer and
// Idempotency-Key; six in ten are patient and retry a 503 or a transport
// error with the same key.
func (w *workload) buyer(ctx context.Context, i int) {
	rng := w.rng(uint64(100 + i))
	for n := 0; ctx.Err() == nil; n++ {
		sku := w.skus[rng.IntN(len(w.skus))]
		qty := 1
		if r := rng.IntN(10); r == 0 {
			qty = 3
		} else if r < 3 {
			qty = 2
		}
		kind, retries := "buyer", 0
		if rng.IntN(10) < 6 {
			kind, retries = "patient", maxRetries
		}
		customer := fmt.Sprintf("r%d-b%d-%d", w.run, i, n)
		idx := w.h.newOp(kind, customer, fmt.Sprintf("k%d-%d-%08x", i, n, rng.Uint32()), sku, qty)
		w.order(ctx, rng, idx, retries)
		// Thinking 1-5s between orders, the buyers ask for about 11 units a
		// second (the hammer aside), far beyond the restocks' 3 or so but
		// slow enough that the first stock lasts some 20s: a fault early in
		// the sale meets orders in flight.
		sleep(ctx, time.Duration(1000+rng.IntN(4000))*time.Millisecond)
	}
}

// order sends op idx, retrying with the same key after a 503 or an
// unknown outcome, up to retries times, honouring Retry-After. The
// requests are not tied to ctx: the end of the sale must not cut off an
// answer the checker needs.
func (w *workload) order(ctx context.Context, rng *rand.Rand, idx, retries int) attempt {
	for try := 0; ; try++ {
		gw := rng.IntN(len(w.p.urls))
		a := w.h.place(context.Background(), w.client, w.p.urls[gw], gw, idx)
		again := a.Status == http.StatusServiceUnavailable || a.outcome() == unknown
		if !again || try >= retries || ctx.Err() != nil {
			return a
		}
		sleep(ctx, retryDelay(a))
	}
}

// retryDelay is Retry-After (at most 3s), or 500ms without one.
func retryDelay(a attempt) time.Duration {
	if s, err := strconv.Atoi(a.RetryAfter); err == nil && s > 0 {
		return time.Duration(min(s, 3)) * time.Second
	}
	return 500 * time.Millisecond
}

// hammer is one customer sending about 100 orders a second for the first
// SKU, each with a new key, never retrying: most are answered 429. Each
// request runs on its own, so a slow answer does not slow the hammer; it
// returns once every request it sent was answered.
func (w *workload) hammer(ctx context.Context) {
	customer := fmt.Sprintf("r%d-hammer", w.run)
	var wg sync.WaitGroup
	for n := 0; ctx.Err() == nil; n++ {
		idx := w.h.newOp("hammer", customer, fmt.Sprintf("h%d", n), w.skus[0], 1)
		wg.Go(func() {
			gw := n % len(w.p.urls)
			w.h.place(context.Background(), w.client, w.p.urls[gw], gw, idx)
		})
		sleep(ctx, hammerPace)
	}
	wg.Wait()
}

// mopUp keeps buying sku one unit at a time with new customers, after the
// faults, until five orders in a row, 80 ms apart, are answered 409 (or
// 30s pass). It reports whether it ended on sold out.
func (w *workload) mopUp(skuIndex int) bool {
	sku := w.skus[skuIndex]
	rng := w.rng(uint64(500 + skuIndex))
	deadline := time.Now().Add(30 * time.Second)
	soldOut := 0
	for n := 0; soldOut < 5 && time.Now().Before(deadline); n++ {
		customer := fmt.Sprintf("r%d-mop%d-%d", w.run, skuIndex, n)
		idx := w.h.newOp("mopup", customer, fmt.Sprintf("m%d", n), sku, 1)
		a := w.order(context.Background(), rng, idx, maxRetries)
		if a.Status == http.StatusConflict {
			soldOut++
		} else {
			soldOut = 0
		}
		time.Sleep(80 * time.Millisecond)
	}
	return soldOut >= 5
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
