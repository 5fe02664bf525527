package gateway

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// admitted is what a request whose claim was admitted is answered: SoldOut
// before the claim, Answer after it.
func admitted(h *SoldOutHints, sku string, now time.Time) Hint {
	return h.Answer(sku, h.SoldOut(sku, now), now)
}

func TestSoldOutHints(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	if d := admitted(h, "a", t0); d.SoldOut || d.Probe {
		t.Fatalf("hint before any observation: %+v", d)
	}
	h.Observe("a", 3, t0)
	if h.SoldOut("a", t0).SoldOut {
		t.Fatal("hint after a reservation that left 3 units")
	}
	h.Observe("a", 0, t0)
	if d := admitted(h, "a", ms(99)); !d.SoldOut || !d.Seen.Equal(t0) {
		t.Fatalf("99ms after the last unit went: %+v, want sold out from the sighting at t0", d)
	}
	if h.SoldOut("b", t0).SoldOut {
		t.Fatal("hint for another SKU")
	}
	// Expired: before its claim a request is still recorded as sold out;
	// the first one admitted probes, the others keep the hint while the
	// probe runs, up to 2 TTL after the sighting.
	if d := h.SoldOut("a", ms(100)); !d.SoldOut || d.Probe {
		t.Fatalf("before the claim, past the TTL: %+v, want sold out and no probe", d)
	}
	probe := admitted(h, "a", ms(100))
	if probe.SoldOut || !probe.Probe {
		t.Fatalf("the first admitted request after the TTL must probe, got %+v", probe)
	}
	if !admitted(h, "a", ms(150)).SoldOut || !admitted(h, "a", ms(199)).SoldOut {
		t.Fatal("hint not kept while the probe runs")
	}
	if d := h.SoldOut("a", ms(200)); d.SoldOut {
		t.Fatalf("answered from a sighting 2 TTL old: %+v", d)
	}
	if d := h.Answer("a", Hint{SoldOut: true, Seen: t0}, ms(200)); d.SoldOut || d.Probe {
		t.Fatalf("claimed within 2 TTL, answered at 2 TTL: %+v, want a reservation", d)
	}
	h.Observe("a", 0, ms(210)) // a reservation found it still sold out
	if !admitted(h, "a", ms(300)).SoldOut {
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

// TestSoldOutHintsAnswerLatest: a claim recorded as sold out is answered
// from the latest sighting, and reserves when units were seen since.
func TestSoldOutHintsAnswerLatest(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	h.Observe("a", 0, t0)
	d := h.SoldOut("a", t0.Add(150*time.Millisecond))
	h.Observe("a", 0, t0.Add(140*time.Millisecond)) // a probe saw it sold out again
	if got := h.Answer("a", d, t0.Add(160*time.Millisecond)); !got.SoldOut || !got.Seen.Equal(t0.Add(140*time.Millisecond)) {
		t.Fatalf("%+v, want sold out from the newer sighting", got)
	}
	d = h.SoldOut("a", t0.Add(170*time.Millisecond))
	h.Observe("a", 2, t0.Add(165*time.Millisecond)) // units came back
	if got := h.Answer("a", d, t0.Add(171*time.Millisecond)); got.SoldOut || got.Probe {
		t.Fatalf("%+v, want a reservation: units were seen since the claim began", got)
	}
}

// TestSoldOutHintsRefusedTakeNoProbe: any number of requests refused at
// their claim (they call SoldOut only) leave the probe to the first
// admitted request.
func TestSoldOutHintsRefusedTakeNoProbe(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	h.Observe("a", 0, t0)
	for i := range 1000 {
		h.SoldOut("a", t0.Add(100*time.Millisecond+time.Duration(i)*time.Microsecond))
	}
	if d := admitted(h, "a", t0.Add(101*time.Millisecond)); !d.Probe {
		t.Fatalf("the first admitted request after a thousand refused ones: %+v, want the probe", d)
	}
}

// TestSoldOutHintsAbandonedProbe: a probe that never reached the reserve
// script gives the slot back, so the next admitted request probes; an
// Abandon of a probe already replaced frees nobody else's.
func TestSoldOutHintsAbandonedProbe(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	h := &SoldOutHints{TTL: 100 * time.Millisecond}
	h.Observe("a", 0, t0)
	probe := admitted(h, "a", at(120))
	if !probe.Probe {
		t.Fatalf("%+v, want the probe", probe)
	}
	h.Abandon("a", probe)
	next := admitted(h, "a", at(121))
	if !next.Probe {
		t.Fatalf("after an abandoned probe: %+v, want the next admitted request to probe", next)
	}
	h.Abandon("a", Hint{SoldOut: true}) // not a probe: nothing to give back
	h.Abandon("a", probe)               // given back already
	if d := admitted(h, "a", at(122)); !d.SoldOut {
		t.Fatalf("an Abandon freed the running probe's slot: %+v", d)
	}
}

func TestSoldOutHintsOff(t *testing.T) {
	var nilHints *SoldOutHints
	off := &SoldOutHints{}
	for _, h := range []*SoldOutHints{nilHints, off} {
		h.Observe("a", 0, time.Now())
		if d := admitted(h, "a", time.Now()); d.SoldOut || d.Probe {
			t.Fatalf("%#v keeps hints", h)
		}
		h.Abandon("a", Hint{Probe: true})
		h.Forget("a")
	}
}

// TestSoldOutHintsOneProbePerExpiry: 512 admitted requests meet an expired
// hint at the same moment, while 512 refused ones ask too; exactly one is
// sent to the reserve script.
func TestSoldOutHintsOneProbePerExpiry(t *testing.T) {
	h := &SoldOutHints{TTL: time.Second}
	t0 := time.Unix(1_700_000_000, 0)
	h.Observe("a", 0, t0)
	expired := t0.Add(time.Second)
	var probes, soldOut atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 1024 {
		wg.Go(func() {
			<-start
			d := h.SoldOut("a", expired)
			if i%2 == 1 {
				return // refused at its claim
			}
			switch d = h.Answer("a", d, expired); {
			case d.Probe:
				probes.Add(1)
			case d.SoldOut:
				soldOut.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if p, s := probes.Load(), soldOut.Load(); p != 1 || s != 511 {
		t.Fatalf("%d probes and %d sold-out answers for 512 admitted requests, want 1 and 511", p, s)
	}
}

// TestSoldOutHintsConcurrent runs refused and admitted requests, probes
// and reservations' observations of a few SKUs at once on a shared clock
// that moves forward (for the race detector). Every sold-out answer comes
// from a sighting less than 2 TTL old (or newer than the answer's clock
// reading: another request observed in between), and the map ends bounded by the
// SKUs.
func TestSoldOutHintsConcurrent(t *testing.T) {
	const ttl = 10 * time.Millisecond
	h := &SoldOutHints{TTL: ttl}
	t0 := time.Unix(1_700_000_000, 0)
	var clock atomic.Int64 // microseconds since t0
	now := func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Microsecond) }
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 4000 {
				sku := fmt.Sprintf("sku-%d", i%8)
				clock.Add(int64(g%3) * 7)
				start := now()
				d := h.SoldOut(sku, start)
				switch {
				case i%5 == 0:
					h.Observe(sku, (g+i)%2, start)
				case i%3 == 0: // refused at its claim
				case d.SoldOut:
					at := now()
					switch d = h.Answer(sku, d, at); {
					case d.SoldOut && at.Sub(d.Seen) >= 2*ttl:
						t.Errorf("sold out at %v from a sighting at %v", at.Sub(t0), d.Seen.Sub(t0))
					case d.Probe && i%2 == 0:
						h.Abandon(sku, d)
					case d.Probe:
						h.Observe(sku, i%2, start)
					}
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
