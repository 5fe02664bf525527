package gateway

import (
	"sync"
	"time"
)

// SoldOutHints remembers, for a short while, the SKUs this gateway saw
// with no unit left, so that the bulk of a flash sale (every request after
// the last unit) is answered without the reserve script: one Redis call
// per request (the customer's admit script, which still spends the
// customer's rate budget and records the answer under the idempotency
// key) instead of two, and none on the SKU's hot master.
//
// A hint is only an optimisation of the answer "sold out", never of a
// sale, and it never answers from a sighting older than 2 TTL (the window
// the API promises for 409 sold_out): it is set when a reservation left 0
// units or found 0, dropped when one found units, and answers alone for
// TTL. After that, one request (the probe) runs the reserve script again
// while the others keep answering from the hint until 2 TTL after the
// sighting: a stampede of reservations on the hot master at every expiry
// would cost what the hint saves, and it came exactly when that master was
// slow. Past 2 TTL with no new sighting every request reserves until one
// renews the hint. Units that come back are sold at most 2 TTL later.
//
// A request is asked twice. SoldOut, before its claim, says whether the
// claim is recorded as answered sold out; Answer, once the claim was
// admitted and made a new record, says whether it is answered from the
// hint or takes the probe. The probe goes only to a request its customer's
// budget admitted, so a client refused at its claim (rate limited, a
// reused key, a repeat), however often it asks, never holds the probe,
// never renews the hint (only reservations do), and never keeps another
// buyer from reserving. The zero value, or a TTL of 0, keeps no hint.
type SoldOutHints struct {
	TTL time.Duration

	mu     sync.RWMutex
	hints  map[string]*hint // bounded by the SKUs that sold out here
	probes uint64           // the last probe handed out
}

type hint struct {
	seen  time.Time // when a reservation last saw no unit left
	probe uint64    // the running probe; 0: none
}

// Hint is what SoldOut or Answer decided for one request.
type Hint struct {
	// SoldOut: record the claim as answered sold out (SoldOut), or answer
	// sold out without the reserve script (Answer).
	SoldOut bool
	// Probe: this request holds the probe; its reservation's outcome goes
	// to Observe, or Abandon when it does not reserve.
	Probe bool
	// Seen is when the sighting behind SoldOut was made.
	Seen time.Time

	probe uint64
}

// SoldOut decides, before the request's claim, whether an order for sku
// may be answered sold out: a sighting less than 2 TTL old. It takes no
// probe: Answer does, once the claim was admitted.
func (h *SoldOutHints) SoldOut(sku string, now time.Time) Hint {
	if h == nil || h.TTL <= 0 {
		return Hint{}
	}
	h.mu.RLock()
	e, ok := h.hints[sku]
	var seen time.Time
	if ok {
		seen = e.seen
	}
	h.mu.RUnlock()
	if !ok || !now.Before(seen.Add(2*h.TTL)) {
		return Hint{} // too old to answer from: reserve
	}
	return Hint{SoldOut: true, Seen: seen}
}

// Answer decides, for a request whose claim d (from SoldOut) was admitted
// and recorded as answered sold out, whether it is answered sold out now
// (SoldOut, from the latest sighting, which is less than 2 TTL old), or
// reserves: as the probe (Probe), or because no sighting is recent enough
// (neither). A request that reserves drops its record's mark first.
func (h *SoldOutHints) Answer(sku string, d Hint, now time.Time) Hint {
	if h == nil || h.TTL <= 0 || !d.SoldOut {
		return Hint{}
	}
	// The bulk of a sale finds a fresh hint or a running probe: shared
	// lock only.
	h.mu.RLock()
	e, ok := h.hints[sku]
	var fresh bool
	if ok {
		fresh = now.Before(e.seen.Add(h.TTL)) || (e.probe != 0 && now.Before(e.seen.Add(2*h.TTL)))
		d = Hint{SoldOut: true, Seen: e.seen}
	}
	h.mu.RUnlock()
	if fresh {
		return d
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok = h.hints[sku]
	switch {
	case !ok:
		return Hint{} // units were seen since, or the stock loaded here
	case now.Before(e.seen.Add(h.TTL)):
		return Hint{SoldOut: true, Seen: e.seen}
	case !now.Before(e.seen.Add(2 * h.TTL)):
		delete(h.hints, sku)
		return Hint{}
	case e.probe != 0:
		return Hint{SoldOut: true, Seen: e.seen} // a probe is on its way
	}
	h.probes++
	e.probe = h.probes
	return Hint{Probe: true, probe: e.probe}
}

// Observe records what a reservation of sku saw: avail units left (after
// a fresh reservation, or found by one that could not be served). now is
// a moment before the reservation ran (the request's start), so that the
// sighting is never taken for younger than it is.
func (h *SoldOutHints) Observe(sku string, avail int, now time.Time) {
	if h == nil || h.TTL <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if avail > 0 {
		delete(h.hints, sku)
		return
	}
	if h.hints == nil {
		h.hints = map[string]*hint{}
	}
	h.hints[sku] = &hint{seen: now}
}

// Abandon gives back the probe d holds, when the request did not reserve
// (d.Probe false, or a probe already replaced: nothing to give back).
func (h *SoldOutHints) Abandon(sku string, d Hint) {
	if h == nil || !d.Probe {
		return
	}
	h.mu.Lock()
	if e, ok := h.hints[sku]; ok && e.probe == d.probe {
		e.probe = 0
	}
	h.mu.Unlock()
}

// Forget drops the hint for sku (its stock was just loaded here).
func (h *SoldOutHints) Forget(sku string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.hints, sku)
	h.mu.Unlock()
}
