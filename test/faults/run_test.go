//go:build faults

package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const nSKUs = 4

// endSale returns once the sale has lasted dur and the nemesis has dealt
// every kind of its deck at least once (a 60 s sale meets about half of
// 21 kinds), or four times dur has passed, or ctx ends.
func endSale(ctx context.Context, h *history, nem *nemesis, dur time.Duration) {
	sleep(ctx, dur)
	for ctx.Err() == nil && !nem.dealtAll() && h.since() < 4*dur {
		sleep(ctx, 250*time.Millisecond)
	}
}

// runOnce is one sale under faults with the given seed, then the drain,
// the reconcile, the mop-up and the checks. A failing run keeps its whole
// history as JSON lines in failedDir(seed).
func runOnce(t *testing.T, eng *engines, run int, seed int64, st settings) {
	began := time.Now()
	t.Logf("seed %d (replay: SURGE_FAULTS_SEED=%d SURGE_FAULTS_RUNS=1), profile %s, sale of %s, faults %v",
		seed, seed, st.profile.name, st.duration, st.kinds)
	h := newHistory()
	p := startPipeline(t, eng, run, h, st.profile)
	skus, stock := loadSKUs(t, p, rand.New(rand.NewPCG(uint64(seed), 1)), run, seed)
	ri := &runInfo{Seed: seed, SKUs: skus, Loaded: maps.Clone(stock), Limits: map[string]int{skus[0]: hammerLimit},
		Deck: st.kinds}
	w := newWorkload(p, h, skus, stock, run, seed)
	nem := newNemesis(p, h, w, rand.New(rand.NewPCG(uint64(seed), 2)), st, func(format string, args ...any) {
		t.Logf("+%.1fs "+format, append([]any{h.since().Seconds()}, args...)...)
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { endSale(ctx, h, nem, st.duration); cancel() }()
	nemDone := make(chan struct{})
	go func() { nem.run(ctx); close(nemDone) }()
	stopLoad := w.start(st.duration)
	<-ctx.Done()
	stopLoad()
	<-nemDone
	saleEnd := time.Now()
	t.Logf("+%.1fs sale over, every answer in; healing, draining", h.since().Seconds())

	reconciles := settle(t, p, saleEnd, st.profile.grace)
	ri.Mopped = mopUp(w)
	if err := p.drain(90 * time.Second); err != nil {
		p.fail("the queue did not drain after the mop-up: %v", err)
	}
	reconciles = append(reconciles, p.reconcile("after the mop-up"))

	e, err := readEnd(context.Background(), p, skus, h)
	if err != nil {
		t.Fatalf("read the end state: %v", err)
	}
	ri.Faults, ri.Reconciles = nem.records(), reconciles
	c := runChecks(h, e, ri)
	summarize(t, h, e, skus, nem.list(), reconciles, time.Since(began))
	t.Logf("samples judged per check: %s", c.judgedLine())
	if verdict := reportViolations(t, seed, c, nem.list()); verdict != "" {
		p.verdicts = append(p.verdicts, verdict)
	}
	if t.Failed() {
		keepHistory(t, ri, h, e, p.dir)
	} else if st.keep {
		if err := saveRun(filepath.Join(p.dir, "history.jsonl"), ri, h, e); err != nil {
			t.Log(err)
		}
	}
}

// keepHistory writes a failing run's history and logs to failedDir.
func keepHistory(t *testing.T, ri *runInfo, h *history, e *endState, logs string) {
	dir := failedDir(ri.Seed)
	path := filepath.Join(dir, "history.jsonl")
	if err := saveRun(path, ri, h, e); err != nil {
		t.Logf("could not keep the history: %v", err)
		return
	}
	if files, err := filepath.Glob(filepath.Join(logs, "*.log")); err == nil {
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
			}
		}
	}
	t.Logf("history of seed %d kept in %s (logs beside it); check it again with "+
		"SURGE_FAULTS_HISTORY=%s go test -tags faults -run TestReplayHistory ./test/faults/; "+
		"replay the deck with SURGE_FAULTS_SEED=%d SURGE_FAULTS_RUNS=1 make test-faults", ri.Seed, dir, path, ri.Seed)
}

// settle heals every engine and program, waits until the queues are
// quiet and the reconciler's grace has passed since the sale, and runs
// `reconciler once` twice. It returns their exit codes.
func settle(t *testing.T, p *pipeline, saleEnd time.Time, grace time.Duration) []int {
	if err := p.eng.heal(); err != nil {
		p.fail("heal the engines: %v", err)
	}
	if err := p.ensureRunning(); err != nil {
		p.fail("after the sale: %v", err)
	}
	if err := p.waitReady(90 * time.Second); err != nil {
		p.fail("gateways not ready after the sale: %v", err)
	}
	if err := p.drain(150 * time.Second); err != nil {
		p.fail("the queue did not drain after the sale: %v", err)
	}
	if wait := time.Until(saleEnd.Add(grace + 2*time.Second)); wait > 0 {
		t.Logf("waiting %s for the reconciler's grace (%s) to pass since the sale", wait.Round(time.Second), grace)
		time.Sleep(wait)
	}
	return []int{p.reconcile("after the sale"), p.reconcile("after the sale, again")}
}

// mopUp buys every SKU until sold out, in parallel, with the sampler
// reading Redis meanwhile (the 409s that end the mop-up are judged by
// check 7b), and tells per SKU whether it ended on sold out.
func mopUp(w *workload) map[string]bool {
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { w.sampler(ctx); close(sampled) }()
	defer func() { cancel(); <-sampled }()
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

// hammerLimit is the purchase limit per customer of the first SKU, the one
// the hammer buys: a bot gets at most this many units, whatever its rate.
const hammerLimit = 3

// loadSKUs creates the run's SKUs with 20-60 units each through the admin
// API, the first with a purchase limit per customer (hammerLimit), and
// returns them with their stock.
func loadSKUs(t *testing.T, p *pipeline, rng *rand.Rand, run int, seed int64) ([]string, map[string]int) {
	t.Helper()
	stock := map[string]int{}
	var skus []string
	for i := range nSKUs {
		sku := fmt.Sprintf("f%d-r%d-sku%d", seed%1_000_000, run, i)
		n := 20 + rng.IntN(41)
		limit := -1
		if i == 0 {
			limit = hammerLimit
		}
		status, err := p.putStockLimit(context.Background(), i%len(p.urls), sku, n, limit)
		if err != nil || status != http.StatusOK {
			t.Fatalf("load %d units of %s: %d %v", n, sku, status, err)
		}
		skus, stock[sku] = append(skus, sku), n
	}
	t.Logf("SKUs: %v", stock)
	return skus, stock
}
