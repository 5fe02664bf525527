package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"surge/pkg/order"
)

var stepNames = map[Step]string{StepClaim: "claim", StepReserve: "reserve", StepReserveRetry: "reserve-retry",
	StepUndo: "undo", StepPublish: "publish"}

var answerNames = map[Answer]string{AnswerSoldOutSighted: "sold-out-sighted", AnswerOutcomeUnknown: "outcome-unknown"}

// stepKey marks the context stepLog's Begin returns.
type stepKey struct{}

// stepLog records what an Observer is told, one line per step and answer.
// End checks it got the context its Begin returned.
type stepLog struct {
	mu  sync.Mutex
	got []string
}

func (l *stepLog) Begin(ctx context.Context, step Step, _ order.Order) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

func (l *stepLog) End(ctx context.Context, step Step, o order.Order, r Result) {
	line := stepNames[step] + " " + stepOutcome(step, r)
	if ctx.Value(stepKey{}) != step {
		line += " (not Begin's context)"
	}
	if o.ID == "" && step != StepClaim {
		line += " (no order id)"
	}
	l.add(line)
}

func (l *stepLog) Answered(_ context.Context, o order.Order, a Answer) {
	if o.ID == "" {
		l.add(answerNames[a]) // a sold-out answer from a read names no order
		return
	}
	l.add(answerNames[a] + " " + o.ID)
}

func (l *stepLog) add(line string) {
	l.mu.Lock()
	l.got = append(l.got, line)
	l.mu.Unlock()
}

func (l *stepLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}

// stepOutcome describes a result in a word or two.
func stepOutcome(step Step, r Result) string {
	switch {
	case errors.Is(r.Err, order.ErrSoldOut):
		return "sold-out"
	case errors.Is(r.Err, order.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(r.Err, order.ErrRateLimited):
		return "limited"
	case r.Err != nil:
		return "error"
	case step == StepClaim && r.Claim.Created:
		return "created"
	case step == StepClaim:
		return "found"
	case r.Reservation.Repeat:
		return "repeat"
	case step == StepReserve || step == StepReserveRetry:
		return fmt.Sprint("avail=", r.Reservation.Avail)
	}
	return "ok"
}

// ctxQueue publishes through q and records whether each publish ran with
// the context the observer's Begin returned (a span's, whose trace the
// message carries).
type ctxQueue struct {
	*fakeQueue
	inBegin []bool
}

func (q *ctxQueue) Publish(ctx context.Context, o order.Order) error {
	q.inBegin = append(q.inBegin, ctx.Value(stepKey{}) == StepPublish)
	return q.fakeQueue.Publish(ctx, o)
}

// TestObserverSeesEachStep: the observer is told of each step of an
// order's path with its outcome, in order, and of the answers given
// without a step; the publish runs in the context Begin returned.
func TestObserverSeesEachStep(t *testing.T) {
	st, claims := newFakeStock(3), newFakeClaims()
	q := &ctxQueue{fakeQueue: &fakeQueue{errs: []error{nil, nil, errBrokerOut, errNoConfirm}}}
	log := &stepLog{}
	s := newService(st, claims, nil)
	s.Queue, s.Observer = q, log
	s.SoldOut = newSoldOut(st)
	claims.limited["hammer"] = true
	ctx := context.Background()
	id := func(customer, key string) string { return order.IDFor(customer, key, 0) }
	cases := []struct {
		name, customer, key string
		want                []string
	}{
		{"accepted", "alice", "k1", []string{"claim created", "reserve avail=2", "publish ok"}},
		{"retry", "alice", "k1", []string{"claim found", "reserve-retry repeat", "publish ok"}},
		{"publish refused", "bob", "k1", []string{"claim created", "reserve avail=1", "publish error", "undo ok"}},
		{"no confirm", "carol", "k1", []string{"claim created", "reserve avail=1", "publish unknown",
			"outcome-unknown " + id("carol", "k1")}},
		{"rate limited", "hammer", "k1", []string{"claim limited"}},
		{"last unit", "dave", "k1", []string{"claim created", "reserve avail=0", "publish ok"}},
		{"sold out from a read", "erin", "k1", []string{"sold-out-sighted"}},
	}
	for _, c := range cases {
		if err := s.RefuseSoldOut(ctx, buy(c.customer, 1), c.key); err == nil {
			_, _ = s.Accept(ctx, buy(c.customer, 1), c.key)
		}
		if got := log.take(); !slices.Equal(got, c.want) {
			t.Errorf("%s: observer told %q, want %q", c.name, got, c.want)
		}
	}
	if len(q.inBegin) != 5 || slices.Contains(q.inBegin, false) {
		t.Errorf("publishes in Begin's context: %v, want 5 of 5", q.inBegin)
	}
}

// TestObserversCombine: Observe leaves out nil observers, and Observers
// tells each of them every step.
func TestObserversCombine(t *testing.T) {
	if Observe(nil, nil) != nil {
		t.Fatal("Observe of nil observers is not nil")
	}
	one := &stepLog{}
	if Observe(nil, one) != Observer(one) {
		t.Fatal("Observe of one observer is not that observer")
	}
	a, b := &stepLog{}, &stepLog{}
	s := newService(newFakeStock(1), newFakeClaims(), &fakeQueue{})
	s.Observer = Observe(a, nil, b)
	if _, err := s.Accept(context.Background(), buy("alice", 1), "k1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"claim created", "reserve avail=0", "publish ok"}
	if ga, gb := a.take(), b.take(); !slices.Equal(ga, want) || !slices.Equal(gb, want) {
		t.Fatalf("observers told %q and %q, want %q each", ga, gb, want)
	}
}

// Stand-ins that answer at once and allocate nothing, to count what
// Accept itself allocates.
type (
	quietClaims struct{}
	quietStock  struct{}
	quietQueue  struct{}
	quietObs    struct{}
)

func (quietClaims) Claim(context.Context, order.Order, string) (order.Claim, error) {
	return order.Claim{OrderID: "o_1", Created: true, Nonce: "n"}, nil
}
func (quietClaims) Existing(context.Context, order.Order, string) (string, bool, error) {
	return "", false, nil
}
func (quietClaims) Forget(context.Context, order.Claim) (bool, error) { return true, nil }
func (quietStock) Reserve(context.Context, order.Order) (order.Reservation, error) {
	return order.Reservation{Avail: 9, Nonce: "n"}, nil
}
func (quietStock) ReserveRetry(context.Context, order.Order) (order.Reservation, error) {
	return order.Reservation{Avail: 9, Nonce: "n"}, nil
}
func (quietStock) Undo(context.Context, string, string, string) (int, error) { return 0, nil }
func (quietQueue) Publish(context.Context, order.Order) error                { return nil }

func (quietObs) Begin(ctx context.Context, _ Step, _ order.Order) context.Context { return ctx }
func (quietObs) End(context.Context, Step, order.Order, Result)                   {}
func (quietObs) Answered(context.Context, order.Order, Answer)                    {}

// TestObserverAllocatesNothing: telling observers of the steps allocates
// nothing per order: Accept allocates as much with two observers as with
// none.
func TestObserverAllocatesNothing(t *testing.T) {
	if raceDetector {
		t.Skip("allocations are counted without the race detector (make test runs this test again without -race)")
	}
	s := newService(nil, nil, nil)
	s.Stock, s.Idem, s.Queue = quietStock{}, quietClaims{}, quietQueue{}
	ctx := context.Background()
	accept := func() {
		if _, err := s.Accept(ctx, buy("alice", 1), "k1"); err != nil {
			t.Fatal(err)
		}
	}
	s.Observer = nil
	none := testing.AllocsPerRun(100, accept)
	s.Observer = Observe(quietObs{}, quietObs{})
	two := testing.AllocsPerRun(100, accept)
	if two != none {
		t.Fatalf("Accept allocates %v times with two observers, %v with none", two, none)
	}
}
