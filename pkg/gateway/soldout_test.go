package gateway

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSoldOutHints(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	if h.SoldOut("a", t0) {
		t.Fatal("hint before any observation")
	}
	h.Observe("a", 3, t0)
	if h.SoldOut("a", t0) {
		t.Fatal("hint after a reservation that left 3 units")
	}
	h.Observe("a", 0, t0)
	if !h.SoldOut("a", ms(99)) {
		t.Fatal("no hint 99ms after the last unit went")
	}
	if h.SoldOut("b", t0) {
		t.Fatal("hint for another SKU")
	}
	// Expired: the first caller probes, the others keep the hint while the
	// probe runs, for at most another TTL.
	if h.SoldOut("a", ms(100)) {
		t.Fatal("the first caller after the TTL must probe")
	}
	if !h.SoldOut("a", ms(150)) || !h.SoldOut("a", ms(199)) {
		t.Fatal("hint not kept while the probe runs")
	}
	if h.SoldOut("a", ms(200)) {
		t.Fatal("a probe that never answered must be replaced after a TTL")
	}
	h.Observe("a", 0, ms(210)) // the probe found it still sold out
	if !h.SoldOut("a", ms(300)) {
		t.Fatal("hint not renewed by the probe's answer")
	}
	h.Observe("a", 1, ms(301)) // a unit came back
	if h.SoldOut("a", ms(302)) {
		t.Fatal("hint kept after a reservation found a unit")
	}
	h.Observe("a", 0, t0)
	h.Forget("a")
	if h.SoldOut("a", t0) {
		t.Fatal("hint kept after Forget")
	}
}

func TestSoldOutHintsOff(t *testing.T) {
	var nilHints *SoldOutHints
	off := &SoldOutHints{}
	for _, h := range []*SoldOutHints{nilHints, off} {
		h.Observe("a", 0, time.Now())
		if h.SoldOut("a", time.Now()) {
			t.Fatalf("%#v keeps hints", h)
		}
		h.Forget("a")
	}
}

// TestSoldOutHintsOneProbePerExpiry: 512 requests meet an expired hint at
// the same moment; exactly one of them is sent to the reserve script.
func TestSoldOutHintsOneProbePerExpiry(t *testing.T) {
	h := &SoldOutHints{TTL: time.Second}
	t0 := time.Now()
	h.Observe("a", 0, t0)
	expired := t0.Add(time.Second)
	var probes atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 512 {
		wg.Go(func() {
			<-start
			if !h.SoldOut("a", expired) {
				probes.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d requests probed one expired hint, want 1", n)
	}
}

// TestSoldOutHintsConcurrent runs readers and writers of a few SKUs at
// once (for the race detector) and checks the map ends bounded by them.
func TestSoldOutHintsConcurrent(t *testing.T) {
	h := &SoldOutHints{TTL: time.Millisecond}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 2000 {
				sku := fmt.Sprintf("sku-%d", i%8)
				now := time.Now()
				if i%3 == 0 {
					h.Observe(sku, (g+i)%2, now)
				} else {
					h.SoldOut(sku, now)
				}
			}
		})
	}
	wg.Wait()
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.hints) > 8 {
		t.Fatalf("%d hints for 8 SKUs", len(h.hints))
	}
}
