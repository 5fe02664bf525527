package console

import (
	"sync"
	"time"
)

// rates turns the counters the board reads (units accepted in Redis,
// units invoiced in MySQL) into per-second rates over the last
// rateWindow, from the samples every board refresh takes. Samples are kept
// per SKU; a SKU nobody looked at for rateForget is forgotten.
type rates struct {
	now  func() time.Time
	mu   sync.Mutex
	skus map[string][]sample
}

type sample struct {
	at                 time.Time
	accepted, invoiced int
}

const (
	rateWindow = 5 * time.Second
	rateForget = 10 * time.Minute
	// rateMinGap keeps many open boards from filling the window with
	// samples taken a few milliseconds apart.
	rateMinGap = 200 * time.Millisecond
)

func newRates(now func() time.Time) *rates {
	return &rates{now: now, skus: map[string][]sample{}}
}

// observe records sku's counters now and returns the accepted and
// invoiced units per second over the window (0 until two samples exist).
func (r *rates) observe(sku string, accepted, invoiced int) (acceptedPerSec, invoicedPerSec float64) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.skus[sku]
	if len(s) == 0 || now.Sub(s[len(s)-1].at) >= rateMinGap {
		s = append(s, sample{now, accepted, invoiced})
	}
	// Keep the newest sample older than the window as the baseline.
	for len(s) > 2 && now.Sub(s[1].at) >= rateWindow {
		s = s[1:]
	}
	r.skus[sku] = s
	for k, v := range r.skus {
		if now.Sub(v[len(v)-1].at) > rateForget {
			delete(r.skus, k)
		}
	}
	first, last := s[0], s[len(s)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0, 0
	}
	return max(float64(last.accepted-first.accepted)/dt, 0), max(float64(last.invoiced-first.invoiced)/dt, 0)
}
