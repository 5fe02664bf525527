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
	if h.SoldOut("a", t0).SoldOut {
		t.Fatal("hint before any observation")
	}
	h.Observe("a", 3, t0)
	if h.SoldOut("a", t0).SoldOut {
		t.Fatal("hint after a reservation that left 3 units")
	}
	h.Observe("a", 0, t0)
	if !h.SoldOut("a", ms(99)).SoldOut {
		t.Fatal("no hint 99ms after the last unit went")
	}
	if h.SoldOut("b", t0).SoldOut {
		t.Fatal("hint for another SKU")
	}
	// Expired: the first caller probes, the others keep the hint while the
	// probe runs, up to 2 TTL after the sighting.
	if d := h.SoldOut("a", ms(100)); d.SoldOut || !d.Probe {
		t.Fatalf("the first caller after the TTL must probe, got %+v", d)
	}
	if !h.SoldOut("a", ms(150)).SoldOut || !h.SoldOut("a", ms(199)).SoldOut {
		t.Fatal("hint not kept while the probe runs")
	}
	if d := h.SoldOut("a", ms(200)); d.SoldOut {
		t.Fatalf("answered from a sighting 2 TTL old: %+v", d)
	}
	h.Observe("a", 0, ms(210)) // a reservation found it still sold out
	if !h.SoldOut("a", ms(300)).SoldOut {
		t.Fatal("hint not renewed by the reservation's answer")
	}
	h.Observe("a", 1, ms(301)) // a unit came back
	if h.SoldOut("a", ms(302)).SoldOut {
		t.Fatal("hint kept after a reservation found a unit")
	}
	h.Observe("a", 0, t0)
	h.Forget("a")
	if h.SoldOut("a", t0).SoldOut {
		t.Fatal("hint kept after Forget")
	}
}

// TestSoldOutHintsAbandonedProbe: a probe that never reached the reserve
// script (its claim was refused) gives the slot back, so the next request
// probes instead of being answered from the old sighting.
func TestSoldOutHintsAbandonedProbe(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	h.Observe("a", 0, t0)
	probe := h.SoldOut("a", t0.Add(120*time.Millisecond))
	if !probe.Probe {
		t.Fatalf("%+v, want the probe", probe)
	}
	h.Abandon("a", probe)
	if d := h.SoldOut("a", t0.Add(121*time.Millisecond)); !d.Probe {
		t.Fatalf("after an abandoned probe: %+v, want the next caller to probe", d)
	}
	h.Abandon("a", Hint{SoldOut: true}) // not a probe: nothing to give back
	if d := h.SoldOut("a", t0.Add(122*time.Millisecond)); !d.SoldOut {
		t.Fatalf("a non-probe's Abandon freed the running probe's slot: %+v", d)
	}
}

func TestSoldOutHintsOff(t *testing.T) {
	var nilHints *SoldOutHints
	off := &SoldOutHints{}
	for _, h := range []*SoldOutHints{nilHints, off} {
		h.Observe("a", 0, time.Now())
		if d := h.SoldOut("a", time.Now()); d.SoldOut || d.Probe {
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
			if h.SoldOut("a", expired).Probe {
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
