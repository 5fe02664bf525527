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
// slow. A probe that never reaches the reserve script (its claim was
// refused: rate limited, a reused key, a repeat) gives the slot back at
// once (Abandon), so no client, however often it is refused, holds it.
// Past 2 TTL with no new sighting every request reserves until one renews
// the hint. Units that come back are sold at most 2 TTL later. The zero
// value, or a TTL of 0, keeps no hint.
type SoldOutHints struct {
	TTL time.Duration

	mu    sync.RWMutex
	hints map[string]*hint // bounded by the SKUs that sold out here
}

type hint struct {
	seen    time.Time // when a reservation last saw no unit left
	probeAt time.Time // when the running probe started; zero: none
}

// Hint is what SoldOut decided for one request.
type Hint struct {
	// SoldOut: answer sold out without the reserve script.
	SoldOut bool
	// Probe: this request holds the probe slot; its reservation's outcome
	// goes to Observe, or Abandon when it does not reserve.
	Probe bool
	// Seen is when the sighting behind SoldOut was made.
	Seen time.Time
}

// Fresh tells whether d's sighting may still answer sold out at now:
// within 2 TTL. The request's claim comes between the decision and the
// answer, and a slow Redis can make it last longer than that.
func (h *SoldOutHints) Fresh(d Hint, now time.Time) bool {
	return h != nil && d.SoldOut && now.Sub(d.Seen) < 2*h.TTL
}

// SoldOut decides whether an order for sku may be answered sold out now.
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
	switch {
	case !ok:
		return Hint{}
	case now.Before(seen.Add(h.TTL)):
		return Hint{SoldOut: true, Seen: seen}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok = h.hints[sku]; !ok {
		return Hint{}
	}
	switch {
	case now.Before(e.seen.Add(h.TTL)):
		return Hint{SoldOut: true, Seen: e.seen}
	case !now.Before(e.seen.Add(2 * h.TTL)):
		delete(h.hints, sku) // too old to answer from: reserve
		return Hint{}
	case !e.probeAt.IsZero():
		return Hint{SoldOut: true, Seen: e.seen} // a probe is on its way
	}
	e.probeAt = now
	return Hint{Probe: true}
}

// Observe records what a reservation of sku saw: avail units left (after
// a fresh reservation, or found by one that could not be served).
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

// Abandon gives back the probe slot of a request that did not reserve
// (d.Probe false: nothing to give back).
func (h *SoldOutHints) Abandon(sku string, d Hint) {
	if h == nil || !d.Probe {
		return
	}
	h.mu.Lock()
	if e, ok := h.hints[sku]; ok {
		e.probeAt = time.Time{}
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
