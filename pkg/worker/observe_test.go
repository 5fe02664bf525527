package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"surge/pkg/order"
)

var stepNames = map[Step]string{StepLock: "lock", StepLedger: "ledger", StepCommit: "commit", StepRelease: "release"}

// stepKey marks the context stepLog's Begin returns.
type stepKey struct{}

// stepLog records what an Observer is told; End checks it got the context
// its Begin returned.
type stepLog struct{ got []string }

func (l *stepLog) Begin(ctx context.Context, step Step, _ order.Order) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

func (l *stepLog) End(ctx context.Context, step Step, o order.Order, r Result) {
	line := stepNames[step] + " " + o.ID
	switch {
	case r.Err != nil:
		line += " error"
	case step == StepLock:
		line += fmt.Sprint(" fence=", r.Fence)
	case step == StepLedger:
		line += " " + string(r.Processed.Status)
	case step == StepCommit:
		line += fmt.Sprint(" outcome=", int(r.Commit))
	}
	if ctx.Value(stepKey{}) != step {
		line += " (not Begin's context)"
	}
	l.got = append(l.got, line)
}

func (l *stepLog) Observe(outcome string, _ time.Duration) { l.got = append(l.got, "outcome "+outcome) }

// fencedLocker hands out fence 7, or fails with err; inBegins counts the
// locks taken in a step's context (none may be: the work under the lock is
// no part of the lock's step).
type fencedLocker struct {
	err      error
	inBegins int
}

func (l *fencedLocker) Lock(ctx context.Context, _, _ string) (int64, context.Context, func(), error) {
	if ctx.Value(stepKey{}) != nil {
		l.inBegins++
	}
	if l.err != nil {
		return 0, nil, nil, l.err
	}
	return 7, ctx, func() {}, nil
}

// ctxLedger answers res and records whether it ran in its step's context.
type ctxLedger struct {
	res     order.Processed
	inBegin []bool
}

func (l *ctxLedger) Process(ctx context.Context, _ order.Order, _ int64) (order.Processed, error) {
	l.inBegin = append(l.inBegin, ctx.Value(stepKey{}) == StepLedger)
	return l.res, nil
}

// TestObserverSeesEachStep: the observer is told of the lock, the MySQL
// transaction and the Redis script that settles, with their outcomes, in
// order, then of the delivery's outcome; the ledger runs in its step's
// context, the lock in the caller's.
func TestObserverSeesEachStep(t *testing.T) {
	msg := order.Order{ID: "o_1", SKU: "mug", Qty: 1, CustomerID: "alice"}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name   string
		status order.Status
		lock   error
		want   []string
	}{
		{"invoiced", order.StatusInvoiced, nil,
			[]string{"lock o_1 fence=7", "ledger o_1 invoiced", "commit o_1 outcome=1", "outcome invoiced"}},
		{"rejected", order.StatusRejected, nil,
			[]string{"lock o_1 fence=7", "ledger o_1 rejected", "release o_1", "outcome rejected"}},
		{"lock busy", order.StatusInvoiced, errors.New("lock not obtained"),
			[]string{"lock o_1 error", "outcome retried"}},
	}
	for _, c := range cases {
		log, locker, ledger := &stepLog{}, &fencedLocker{err: c.lock}, &ctxLedger{res: order.Processed{Status: c.status}}
		p := New(Processor{Ledger: ledger, Stock: &settleLog{}, Lock: locker, Observer: log, Log: quiet})
		p.Handle(context.Background(), &recorder{o: msg})
		if !slices.Equal(log.got, c.want) {
			t.Errorf("%s: observer told %q, want %q", c.name, log.got, c.want)
		}
		if locker.inBegins != 0 || slices.Contains(ledger.inBegin, false) {
			t.Errorf("%s: lock in a step's context %d times, ledger in its own %v", c.name, locker.inBegins, ledger.inBegin)
		}
	}
}

// TestObserversCombine: Observe leaves out nil observers; Observers tells
// each of them every step and outcome, and the latency to those that want
// it.
func TestObserversCombine(t *testing.T) {
	if Observe(nil) != nil {
		t.Fatal("Observe of a nil observer is not nil")
	}
	a, lat := &stepLog{}, &latencies{}
	p := New(Processor{Ledger: fixedLedger{order.Processed{Status: order.StatusInvoiced}}, Stock: &settleLog{},
		Observer: Observe(a, nil, lat), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	o := order.Order{ID: "o_1", SKU: "mug", Qty: 1, CustomerID: "alice", AcceptedAtMs: time.Now().UnixMilli()}
	p.Handle(context.Background(), &recorder{o: o})
	want := []string{"ledger o_1 invoiced", "commit o_1 outcome=1", "outcome invoiced"}
	if !slices.Equal(a.got, want) || len(lat.invoiced) != 1 {
		t.Fatalf("observers told %q and %d latencies, want %q and 1", a.got, len(lat.invoiced), want)
	}
}

// quietSettler and quietObs answer at once and allocate nothing.
type (
	quietSettler struct{}
	quietObs     struct{}
)

func (quietSettler) Commit(context.Context, string, string, int) (order.CommitOutcome, error) {
	return order.CommittedFromResv, nil
}
func (quietSettler) Release(context.Context, string, string, order.ReleaseMode) (int, error) {
	return 1, nil
}
func (quietObs) Begin(ctx context.Context, _ Step, _ order.Order) context.Context { return ctx }
func (quietObs) End(context.Context, Step, order.Order, Result)                   {}
func (quietObs) Observe(string, time.Duration)                                    {}

// TestObserverAllocatesNothing: telling observers of the steps allocates
// nothing per order: the processing allocates as much with two observers
// as with none.
func TestObserverAllocatesNothing(t *testing.T) {
	if raceDetector {
		t.Skip("allocations are counted without the race detector (make test runs this test again without -race)")
	}
	p := New(Processor{Ledger: fixedLedger{order.Processed{Status: order.StatusInvoiced}}, Stock: quietSettler{},
		Lock: &fencedLocker{}})
	ctx := context.Background()
	o := order.Order{ID: "o_1", SKU: "mug", Qty: 1, CustomerID: "alice"}
	process := func() {
		if _, err := p.process(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	p.Observer = nil
	none := testing.AllocsPerRun(100, process)
	p.Observer = Observe(quietObs{}, quietObs{})
	two := testing.AllocsPerRun(100, process)
	if two != none {
		t.Fatalf("processing allocates %v times with two observers, %v with none", two, none)
	}
}
