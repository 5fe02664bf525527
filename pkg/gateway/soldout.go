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
// sale: it is set when a reservation left 0 units or found 0, dropped when
// one found units, and it lasts TTL. When it runs out, one request (the
// probe) runs the reserve script again while the others keep the hint for
// at most another TTL: a stampede of reservations on the hot master at
// every expiry would cost what the hint saves, and it came exactly when
// that master was slow (the longer its round trip, the more requests
// passed before the first answer renewed the hint). Units that come back
// (a released reservation, a restock) are sold at most 2 TTL later. The
// zero value, or a TTL of 0, keeps no hint.
type SoldOutHints struct {
	TTL time.Duration

	mu    sync.RWMutex
	hints map[string]*hint // bounded by the SKUs that sold out here
}

type hint struct {
	until   time.Time // the hint holds until then
	probeAt time.Time // when the running probe started; zero: none
}

// SoldOut reports whether orders for sku may be answered sold out. After
// the hint's TTL, the first caller gets false and is the probe: its
// reservation's outcome, given to Observe, renews or drops the hint.
func (h *SoldOutHints) SoldOut(sku string, now time.Time) bool {
	if h == nil || h.TTL <= 0 {
		return false
	}
	h.mu.RLock()
	e, ok := h.hints[sku]
	fresh := ok && now.Before(e.until)
	h.mu.RUnlock()
	if !ok || fresh {
		return fresh
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok = h.hints[sku]; !ok || now.Before(e.until) {
		return ok
	}
	if !e.probeAt.IsZero() && now.Before(e.probeAt.Add(h.TTL)) {
		return true // a probe is on its way
	}
	e.probeAt = now // this caller probes (again, when a probe got no answer)
	return false
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
	h.hints[sku] = &hint{until: now.Add(h.TTL)}
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
