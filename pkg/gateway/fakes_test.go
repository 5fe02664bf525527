package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"surge/pkg/order"
	"surge/pkg/stock"
)

// fakeClaims keeps idempotency records in memory, as idem.Records does in
// Redis: a record is the request's fingerprint, marked when answered sold
// out; limited customers are refused before anything is recorded.
type fakeClaims struct {
	mu      sync.Mutex
	records map[string]string
	limited map[string]bool
	forgot  []string
	// refuse makes claims fail (Redis refusing writes); down makes
	// Existing fail too (Redis unreachable).
	refuse error
	down   bool
}

func newFakeClaims() *fakeClaims {
	return &fakeClaims{records: map[string]string{}, limited: map[string]bool{}}
}

func (c *fakeClaims) Claim(_ context.Context, o order.Order, key string, soldOut bool) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := order.IDFor(o.CustomerID, key, 0)
	if c.limited[o.CustomerID] {
		return "", false, &order.RateLimitedError{RetryAfter: 1}
	}
	if c.refuse != nil {
		return "", false, c.refuse
	}
	old, ok := c.records[id]
	if !ok {
		c.records[id] = map[bool]string{true: "sold-out", false: o.Fingerprint()}[soldOut]
		return id, true, nil
	}
	switch old {
	case "sold-out":
		return id, false, order.ErrSoldOut
	case o.Fingerprint():
		return id, false, nil
	}
	return id, false, order.ErrIdempotencyMismatch
}

func (c *fakeClaims) Existing(_ context.Context, o order.Order, key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := order.IDFor(o.CustomerID, key, 0)
	if c.down {
		return id, false, errors.New("redis unreachable")
	}
	_, ok := c.records[id]
	return id, ok, nil
}

func (c *fakeClaims) Forget(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.records, id)
	c.forgot = append(c.forgot, id)
	return nil
}

func (c *fakeClaims) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.records[id]
	return ok
}

// fakeStock follows lua/reserve.lua and lua/release.lua for one SKU: order
// states A (reserved), P (repeated), S (sold out); Undo only takes back an
// unrepeated reservation with its nonce. failReserve makes the next
// Reserve run and then report a lost reply; failUndo makes Undo fail.
type fakeStock struct {
	mu          sync.Mutex
	avail       int
	state       map[string]string
	held        map[string]int
	nonces      map[string]string
	seq         int
	failReserve bool
	failUndo    error
	undos       int
}

func newFakeStock(avail int) *fakeStock {
	return &fakeStock{avail: avail, state: map[string]string{}, held: map[string]int{}, nonces: map[string]string{}}
}

func (s *fakeStock) Reserve(_ context.Context, o order.Order) (stock.Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	nonce := fmt.Sprint(s.seq)
	res, err := s.reserve(o, nonce)
	if s.failReserve {
		s.failReserve = false
		return stock.Reservation{Nonce: nonce}, errors.New("i/o timeout (the script ran)")
	}
	return res, err
}

func (s *fakeStock) reserve(o order.Order, nonce string) (stock.Reservation, error) {
	switch s.state[o.ID] {
	case "S":
		return stock.Reservation{Repeat: true, Nonce: nonce}, order.ErrSoldOut
	case "A":
		s.state[o.ID] = "P"
		fallthrough
	case "P":
		return stock.Reservation{Repeat: true, Nonce: nonce}, nil
	}
	if s.avail < o.Qty {
		s.state[o.ID] = "S"
		return stock.Reservation{Avail: s.avail, Nonce: nonce}, order.ErrSoldOut
	}
	s.avail -= o.Qty
	s.state[o.ID], s.held[o.ID], s.nonces[o.ID] = "A", o.Qty, nonce
	return stock.Reservation{Avail: s.avail, Nonce: nonce}, nil
}

func (s *fakeStock) Undo(_ context.Context, _, id, nonce string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undos++
	if s.failUndo != nil {
		return 0, s.failUndo
	}
	st := s.state[id]
	if st == "" || st == "S" {
		return 0, nil
	}
	if st != "A" || s.nonces[id] != nonce {
		return 0, stock.ErrNotYours
	}
	n := s.held[id]
	s.avail += n
	delete(s.state, id)
	delete(s.held, id)
	return n, nil
}

func (s *fakeStock) reserved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.held {
		n += q
	}
	return n
}

func (s *fakeStock) restock(n int) {
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
}

// fakeQueue answers the publishes in turn with errs (nil once they run
// out); during, when set, runs inside the next publish, while it waits for
// its confirm.
type fakeQueue struct {
	mu        sync.Mutex
	errs      []error
	during    func()
	published []string
}

func (q *fakeQueue) Publish(_ context.Context, o order.Order) error {
	q.mu.Lock()
	var err error
	if len(q.errs) > 0 {
		err, q.errs = q.errs[0], q.errs[1:]
	}
	during := q.during
	q.during = nil
	q.mu.Unlock()
	if during != nil {
		during()
	}
	if err == nil {
		q.mu.Lock()
		q.published = append(q.published, o.ID)
		q.mu.Unlock()
	}
	return err
}

type knownSKUs struct{}

func (knownSKUs) Exists(context.Context, string) (bool, error) { return true, nil }
