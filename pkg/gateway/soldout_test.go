package gateway

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSoldOutHints(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	if h.SoldOut("a", t0) {
		t.Fatal("hint before any observation")
	}
	h.Observe("a", 3, t0)
	if h.SoldOut("a", t0) {
		t.Fatal("hint after a reservation that left 3 units")
	}
	h.Observe("a", 0, t0)
	if !h.SoldOut("a", t0.Add(99*time.Millisecond)) {
		t.Fatal("no hint 99ms after the last unit went")
	}
	if h.SoldOut("b", t0) {
		t.Fatal("hint for another SKU")
	}
	if h.SoldOut("a", t0.Add(100*time.Millisecond)) {
		t.Fatal("hint still there after its TTL")
	}
	if len(h.until) != 0 {
		t.Fatalf("expired hint kept: %v", h.until)
	}
	h.Observe("a", 0, t0)
	h.Observe("a", 1, t0.Add(time.Millisecond))
	if h.SoldOut("a", t0.Add(2*time.Millisecond)) {
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
	if len(h.until) > 8 {
		t.Fatalf("%d hints for 8 SKUs", len(h.until))
	}
}
