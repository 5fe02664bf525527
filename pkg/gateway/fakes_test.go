package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"surge/pkg/order"
)

// fakeClaims keeps idempotency records in memory, as idem.Records does in
// Redis: a record is the request's fingerprint, made by a nonce. Limited customers are refused before anything is
// recorded (an unknown outcome when their key names an open order).
type fakeClaims struct {
	mu      sync.Mutex
	records map[string]fakeRecord
	limited map[string]bool
	forgot  []string
	seq     int
	// refuse makes claims fail (Redis refusing writes); down makes
	// Existing fail too (Redis unreachable).
	refuse error
	down   bool
	// during, when set, runs inside the next claim, refused or not, before
	// the record is read (a slow Redis).
	during func()
}

type fakeRecord struct {
	body, nonce string
}

func newFakeClaims() *fakeClaims {
	return &fakeClaims{records: map[string]fakeRecord{}, limited: map[string]bool{}}
}

func (c *fakeClaims) Claim(_ context.Context, o order.Order, key string) (order.Claim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	cl := order.Claim{OrderID: order.IDFor(o.CustomerID, key, 0), Nonce: fmt.Sprint("n", c.seq)}
	if c.during != nil {
		during := c.during
		c.during = nil
		c.mu.Unlock()
		during()
		c.mu.Lock()
	}
	old, ok := c.records[cl.OrderID]
	if c.limited[o.CustomerID] {
		if ok && old.body == o.Fingerprint() {
			return cl, &order.UnknownOutcomeError{OrderID: cl.OrderID, Cause: errors.New("rate limited retry")}
		}
		return order.Claim{}, &order.RateLimitedError{RetryAfter: 1}
	}
	if c.refuse != nil {
		return order.Claim{}, c.refuse
	}
	switch {
	case !ok:
		c.records[cl.OrderID] = fakeRecord{o.Fingerprint(), cl.Nonce}
		cl.Created = true
		return cl, nil
	case old.body != o.Fingerprint():
		return cl, order.ErrIdempotencyMismatch
	}
	return cl, nil
}

func (c *fakeClaims) Existing(_ context.Context, o order.Order, key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := order.IDFor(o.CustomerID, key, 0)
	if c.down {
		return id, false, errors.New("redis unreachable")
	}
	r, ok := c.records[id]
	return id, ok && r.body == o.Fingerprint(), nil
}

func (c *fakeClaims) Forget(_ context.Context, cl order.Claim) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.records[cl.OrderID]; !ok || r.nonce != cl.Nonce {
		return false, nil
	}
	delete(c.records, cl.OrderID)
	c.forgot = append(c.forgot, cl.OrderID)
	return true, nil
}

func (c *fakeClaims) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.records[id]
	return ok
}

// fakeStock follows lua/reserve.lua, lua/release.lua and lua/sighting.lua
// for one SKU: order states A (reserved), P (repeated), S (sold out: a
// later call is judged anew), U (undone); Undo only takes back an
// unrepeated reservation with its nonce. failReserve makes the next
// Reserve run and then report a lost reply; failUndo makes Undo fail;
// afterUndo runs once after the next undo; sightErr makes Sight fail, and
// sightDuring runs inside each Sight; sights counts the Sight calls.
type fakeStock struct {
	mu          sync.Mutex
	avail       int
	state       map[string]string
	held        map[string]int
	nonces      map[string]string
	seq         int
	failReserve bool
	failUndo    error
	afterUndo   func()
	undos       int
	reserves    int
	sightErr    error
	sightDuring func()
	sights      int
	// notLoaded answers every reservation "not loaded"; undone lists the
	// nonces Undo marked, in order.
	notLoaded bool
	undone    []string
}

func newFakeStock(avail int) *fakeStock {
	return &fakeStock{avail: avail, state: map[string]string{}, held: map[string]int{}, nonces: map[string]string{}}
}

func (s *fakeStock) Reserve(_ context.Context, o order.Order) (order.Reservation, error) {
	return s.run(o, true)
}

func (s *fakeStock) ReserveRetry(_ context.Context, o order.Order) (order.Reservation, error) {
	return s.run(o, false)
}

func (s *fakeStock) run(o order.Order, newClaim bool) (order.Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.reserves++
	nonce := fmt.Sprint(s.seq)
	if s.notLoaded {
		return order.Reservation{Nonce: nonce}, order.ErrNotLoaded
	}
	if s.state[o.ID] == "U" {
		if !newClaim {
			return order.Reservation{Nonce: nonce}, order.ErrUndone
		}
		delete(s.state, o.ID)
	}
	res, err := s.reserve(o, nonce)
	if s.failReserve {
		s.failReserve = false
		return order.Reservation{Nonce: nonce}, errors.New("i/o timeout (the script ran)")
	}
	return res, err
}

func (s *fakeStock) reserve(o order.Order, nonce string) (order.Reservation, error) {
	switch s.state[o.ID] {
	case "A":
		s.state[o.ID] = "P"
		fallthrough
	case "P":
		return order.Reservation{Repeat: true, Nonce: nonce}, nil
	}
	if s.avail < o.Qty {
		s.state[o.ID] = "S"
		return order.Reservation{Avail: s.avail, Nonce: nonce}, order.ErrSoldOut
	}
	s.avail -= o.Qty
	s.state[o.ID], s.held[o.ID], s.nonces[o.ID] = "A", o.Qty, nonce
	return order.Reservation{Avail: s.avail, Nonce: nonce}, nil
}

func (s *fakeStock) Undo(_ context.Context, _, id, nonce string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undos++
	if s.failUndo != nil {
		return 0, s.failUndo
	}
	s.undone = append(s.undone, nonce)
	st := s.state[id]
	if st == "" || st == "S" || st == "U" {
		if st != "S" {
			s.state[id] = "U" // as lua/release.lua: the undo leaves its mark
		}
		return 0, nil
	}
	if st != "A" || s.nonces[id] != nonce {
		return 0, order.ErrNotYours
	}
	n := s.held[id]
	s.avail += n
	s.state[id] = "U"
	delete(s.held, id)
	if after := s.afterUndo; after != nil {
		s.afterUndo = nil
		s.mu.Unlock()
		after()
		s.mu.Lock()
	}
	return n, nil
}

func (s *fakeStock) Sight(_ context.Context, _ string, ids []string) (order.Sighting, error) {
	s.mu.Lock()
	s.sights++
	during := s.sightDuring
	s.mu.Unlock()
	if during != nil {
		during()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sightErr != nil {
		return order.Sighting{}, s.sightErr
	}
	sg := order.Sighting{Loaded: true, Avail: s.avail, Reserved: make([]bool, len(ids))}
	for i, id := range ids {
		st := s.state[id]
		sg.Reserved[i] = st != "" && st != "S" && st != "U"
	}
	return sg, nil
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
