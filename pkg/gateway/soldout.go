package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"surge/internal/coalesce"
	"surge/pkg/order"
)

// Sighter reads a SKU for sold-out answers: the units left and whether
// each order id names a reserved order (order.Sighting), in one call that
// writes nothing. *stock.Stock implements it.
type Sighter interface {
	Sight(ctx context.Context, sku string, ids []string) (order.Sighting, error)
}

// SoldOut answers the bulk of a flash sale, every order after the last
// unit, "sold out" with no Redis write and no key kept per request: no
// idempotency claim, no reserve script, no rate budget spent.
//
// Each answer comes from a sighting made while the request was being
// answered, never from an older one: a request for a SKU this gateway
// last saw short of its quantity joins the next read of that SKU
// (Sighter.Sight). Reads are batched per SKU, one in flight at a time
// (internal/coalesce): the requests that arrive while one is in flight go
// together in the next, so a SKU costs one read per round trip however
// many buyers ask, and no request waits on a timer. The read says how many
// units are left and whether any id the request's key can name (its
// Idempotency-Key's window and the windows around it, order.IDsFor) was
// reserved. The request is answered sold out only when the units left are
// fewer than it asks for and its key names no reserved order: a retry of
// an accepted or possibly accepted order always goes the full way and
// gets its own answer. Anything else (units left, a reserved order, the
// stock not loaded, a read that failed or took longer than Timeout, a
// master that took over recently: Failovers) sends the request the full
// way, as if this did not exist.
//
// Nothing is recorded for the answer, so the key stays free: a retry with
// the same key is a new attempt, answered sold out again while no unit is
// left, and taking a unit that came back (a restock, a released
// reservation) as soon as a read sees it. Which SKUs are worth a read is
// learnt from the reservations (Observe): a SKU no reservation saw short
// costs nothing here.
//
// The zero value, or a nil *SoldOut, answers nothing.
type SoldOut struct {
	// Sighter reads the SKUs. Nil: nothing is answered from a sighting.
	Sighter Sighter
	// Window is the idempotency records' TTL: the length of the windows
	// order ids are derived in (order.KeyWindow). Default 24h.
	Window time.Duration
	// Timeout bounds one read; requests whose read fails or outlasts it
	// go the full way. Default 100ms.
	Timeout time.Duration
	// MaxBatch bounds the requests one read answers. Default 256.
	MaxBatch int
	// Now defaults to time.Now (the key's window).
	Now func() time.Time
	// Failovers, when set: no sold-out answer is read from a master that
	// took over recently (its orders may lack ones its predecessor
	// accepted); such orders go the full way (Service.Failovers).
	Failovers Failovers

	once  sync.Once
	reads *coalesce.Coalescer[*sightingAsk]
	// asks keeps the asks of answered requests for the next ones: the
	// bulk of a flash sale allocates no channel per request.
	asks sync.Pool

	mu    sync.RWMutex
	short map[string]int // per SKU last seen short: the units it had left
}

// sightingAsk is one request waiting for its SKU's next read.
type sightingAsk struct {
	qty int
	ids []string
	// done receives true when the read answers the request sold out.
	done chan bool
}

// errSoldOutSighted answers the bulk of a flash sale: one value, built
// once, rather than an error formatted per request.
var errSoldOutSighted = fmt.Errorf("no unit left as of a read made for this request: %w", order.ErrSoldOut)

// Refuse answers o sold out from a read of its SKU made for it (an error
// wrapping order.ErrSoldOut), or returns nil: the order goes the full way.
// It waits for the read only for an order whose SKU this gateway last saw
// with fewer units than it asks for; o and key must be valid.
func (s *SoldOut) Refuse(_ context.Context, o order.Order, key string) error {
	if s == nil || s.Sighter == nil || !s.worthReading(o) {
		return nil
	}
	s.once.Do(s.init)
	w := order.KeyWindow(o.CustomerID, key, s.Now(), s.Window)
	a := s.asks.Get().(*sightingAsk)
	a.qty, a.ids = o.Qty, order.IDsFor(o.CustomerID, key, w-2, 4)
	s.reads.Add(o.SKU, a)
	// The read answers within Timeout whatever happens, so the wait
	// needs no context of its own.
	soldOut := <-a.done
	a.ids = nil
	s.asks.Put(a)
	if soldOut {
		return errSoldOutSighted
	}
	return nil
}

// worthReading tells whether o's SKU was last seen short of o.Qty.
func (s *SoldOut) worthReading(o order.Order) bool {
	s.mu.RLock()
	left, short := s.short[o.SKU]
	s.mu.RUnlock()
	return short && left < o.Qty
}

// Observe records what a reservation (or a read) of sku saw: avail units
// left. A SKU with none left is worth reading for the next orders; one
// with units is not, until a reservation finds it short again.
func (s *SoldOut) Observe(sku string, avail int) {
	if s == nil {
		return
	}
	s.mu.RLock()
	left, short := s.short[sku]
	s.mu.RUnlock()
	if (short && left == avail) || (!short && avail > 0) {
		return // nothing changes: no write lock on the accepting path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if avail > 0 {
		delete(s.short, sku)
		return
	}
	if s.short == nil {
		s.short = map[string]int{}
	}
	s.short[sku] = avail
}

// Forget drops what this gateway saw of sku (its stock was just loaded
// here).
func (s *SoldOut) Forget(sku string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.short, sku)
	s.mu.Unlock()
}

func (s *SoldOut) init() {
	if s.Window <= 0 {
		s.Window = 24 * time.Hour
	}
	if s.Timeout <= 0 {
		s.Timeout = 100 * time.Millisecond
	}
	if s.MaxBatch <= 0 {
		s.MaxBatch = 256
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	s.reads = coalesce.New(s.MaxBatch, s.read)
	s.asks.New = func() any { return &sightingAsk{done: make(chan bool, 1)} }
}

// read reads sku once for a batch of requests and answers each.
func (s *SoldOut) read(sku string, batch []*sightingAsk) {
	if s.Failovers != nil && s.Failovers.Recent(context.Background(), sku) {
		for _, a := range batch {
			a.done <- false
		}
		return
	}
	ids := make([]string, 0, 4*len(batch))
	for _, a := range batch {
		ids = append(ids, a.ids...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	sg, err := s.Sighter.Sight(ctx, sku, ids)
	cancel()
	if err == nil && sg.Loaded {
		s.Observe(sku, sg.Avail)
	}
	at := 0
	for _, a := range batch {
		soldOut := err == nil && sg.Loaded && sg.Avail < a.qty
		if soldOut {
			for _, reserved := range sg.Reserved[at : at+len(a.ids)] {
				soldOut = soldOut && !reserved
			}
		}
		at += len(a.ids)
		a.done <- soldOut
	}
}
