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
// sale: it is set when a reservation left 0 units or found 0, cleared when
// one found units, and it expires after TTL, when the next request runs
// the script again. Units that come back in the meantime (a released
// reservation, a restock) are sold at most TTL later. The zero value, or a
// TTL of 0, keeps no hint.
type SoldOutHints struct {
	TTL time.Duration

	mu    sync.RWMutex
	until map[string]time.Time // bounded by the SKUs that sold out
}

// SoldOut reports whether sku was seen sold out less than TTL ago.
func (h *SoldOutHints) SoldOut(sku string, now time.Time) bool {
	if h == nil || h.TTL <= 0 {
		return false
	}
	h.mu.RLock()
	until, ok := h.until[sku]
	h.mu.RUnlock()
	if ok && !now.Before(until) {
		h.mu.Lock()
		if h.until[sku] == until {
			delete(h.until, sku)
		}
		h.mu.Unlock()
		return false
	}
	return ok
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
		delete(h.until, sku)
		return
	}
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	h.until[sku] = now.Add(h.TTL)
}

// Forget drops the hint for sku (its stock was just loaded here).
func (h *SoldOutHints) Forget(sku string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.until, sku)
	h.mu.Unlock()
}
