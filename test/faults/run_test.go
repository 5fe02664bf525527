//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const nSKUs = 4

// runOnce is one sale under faults with the given seed, then the drain,
// the reconcile, the mop-up and the checks.
func runOnce(t *testing.T, eng *engines, run int, seed int64, dur time.Duration, kinds []faultKind) {
	began := time.Now()
	t.Logf("seed %d (replay: SURGE_FAULTS_SEED=%d SURGE_FAULTS_RUNS=1), sale of %s, faults %v", seed, seed, dur, kindsOrAll(kinds))
	p := startPipeline(t, eng, run)
	skus, stock := loadSKUs(t, p, rand.New(rand.NewPCG(uint64(seed), 1)), run, seed)
	h := newHistory()
	w := newWorkload(p, h, skus, stock, run, seed)
	nem := &nemesis{p: p, h: h, skus: skus, rng: rand.New(rand.NewPCG(uint64(seed), 2)), dur: dur, kinds: kinds,
		logf: func(format string, args ...any) {
			t.Logf("+%.1fs "+format, append([]any{h.since().Seconds()}, args...)...)
		}}

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	nemDone := make(chan struct{})
	go func() { nem.run(ctx); close(nemDone) }()
	stopLoad := w.start(dur)
	<-ctx.Done()
	stopLoad()
	<-nemDone
	saleEnd := time.Now()
	t.Logf("+%.1fs sale over, every answer in; healing, draining", h.since().Seconds())

	reconciles := settle(t, p, saleEnd)
	mopped := mopUp(w)
	if err := p.drain(90 * time.Second); err != nil {
		t.Errorf("the queue did not drain after the mop-up: %v", err)
	}
	reconciles = append(reconciles, p.reconcile("after the mop-up"))

	e, err := readEnd(context.Background(), p, skus, h)
	if err != nil {
		t.Fatalf("read the end state: %v", err)
	}
	c := runChecks(h, e, skus, mopped)
	if err := h.save(filepath.Join(p.dir, "history.jsonl")); err != nil {
		t.Log(err)
	}
	summarize(t, h, e, skus, nem.list(), reconciles, time.Since(began))
	reportViolations(t, seed, c, nem.list())
}

// settle heals every engine and program, waits until the queues are
// quiet and the reconciler's grace has passed since the sale, and runs
// `reconciler once` twice. It returns their exit codes.
func settle(t *testing.T, p *pipeline, saleEnd time.Time) []int {
	if err := p.eng.heal(); err != nil {
		t.Errorf("heal the engines: %v", err)
	}
	if err := p.ensureRunning(); err != nil {
		t.Errorf("restart the programs: %v", err)
	}
	if err := p.waitReady(90 * time.Second); err != nil {
		t.Errorf("gateways not ready after the sale: %v", err)
	}
	if err := p.drain(150 * time.Second); err != nil {
		t.Errorf("the queue did not drain after the sale: %v", err)
	}
	time.Sleep(time.Until(saleEnd.Add(reconcileWait + 2*time.Second)))
	return []int{p.reconcile("after the sale"), p.reconcile("after the sale, again")}
}

// mopUp buys every SKU until sold out, in parallel, and tells per SKU
// whether it ended on sold out.
func mopUp(w *workload) map[string]bool {
	var mu sync.Mutex
	var wg sync.WaitGroup
	mopped := map[string]bool{}
	for i, sku := range w.skus {
		wg.Go(func() {
			ok := w.mopUp(i)
			mu.Lock()
			mopped[sku] = ok
			mu.Unlock()
		})
	}
	wg.Wait()
	return mopped
}

// loadSKUs creates the run's SKUs with 20-60 units each through the admin
// API and returns them with their stock.
func loadSKUs(t *testing.T, p *pipeline, rng *rand.Rand, run int, seed int64) ([]string, map[string]int) {
	t.Helper()
	stock := map[string]int{}
	var skus []string
	for i := range nSKUs {
		sku := fmt.Sprintf("f%d-r%d-sku%d", seed%1_000_000, run, i)
		n := 20 + rng.IntN(41)
		status, err := p.putStock(context.Background(), i%len(p.urls), sku, n)
		if err != nil || status != http.StatusOK {
			t.Fatalf("load %d units of %s: %d %v", n, sku, status, err)
		}
		skus, stock[sku] = append(skus, sku), n
	}
	t.Logf("SKUs: %v", stock)
	return skus, stock
}

// kindsOrAll names the kinds a run draws from.
func kindsOrAll(kinds []faultKind) []faultKind {
	if len(kinds) == 0 {
		return faultKinds
	}
	return kinds
}
