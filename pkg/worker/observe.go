package worker

import (
	"context"
	"time"

	"surge/pkg/order"
)

// Step names one call of an order's processing that an Observer is told
// about.
type Step uint8

// The steps of Handle.
const (
	// StepLock is Locker.Lock, the wait for a busy lock included.
	StepLock Step = iota + 1
	// StepLedger is Ledger.Process: the MySQL transaction (with batching,
	// the wait for the batch the order joined included).
	StepLedger
	// StepCommit is Settler.Commit.
	StepCommit
	// StepRelease is Settler.Release.
	StepRelease
)

// Result is what a step did: its error (as the adapter returned it) and,
// for the steps that have one, its outcome.
type Result struct {
	Err error
	// Fence and Took are StepLock's: the fencing token, and how long the
	// attempt took.
	Fence int64
	Took  time.Duration
	// Processed is StepLedger's.
	Processed order.Processed
	// Commit is StepCommit's.
	Commit order.CommitOutcome
}

// Observer is told of each step of an order's processing and of each
// delivery's outcome: metrics, tracing. Processor.Observer may be nil.
//
// Begin is called before a step runs; the step runs with the context
// Begin returns (a span's), and End is called with that same context once
// the step returned. StepLock is the exception: the lock is taken with the
// caller's context, so the work done under the lock (whose context derives
// from the lock's) is not inside the lock step's context. Observe is told
// each delivery's outcome (one of the Outcome constants) and how long it
// took. Calls come from many handlers at once.
type Observer interface {
	Begin(ctx context.Context, step Step, o order.Order) context.Context
	End(ctx context.Context, step Step, o order.Order, r Result)
	Observe(outcome string, d time.Duration)
}

// LatencyObserver, implemented by an Observer that wants it, is told how
// long each invoiced order took from its acceptance (the gateway's clock)
// to its invoice: what a buyer waits.
type LatencyObserver interface {
	Invoiced(sinceAccepted time.Duration)
}

// Observers tells each of its observers, in order. End gets the context
// the last Begin returned.
type Observers []Observer

var (
	_ Observer        = Observers(nil)
	_ LatencyObserver = Observers(nil)
)

// Observe combines obs, leaving out the nil ones: nil when none is left,
// the observer itself when one is.
func Observe(obs ...Observer) Observer {
	var all Observers
	for _, o := range obs {
		if o != nil {
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

// Begin calls each observer's Begin, passing the context along.
func (obs Observers) Begin(ctx context.Context, step Step, o order.Order) context.Context {
	for _, ob := range obs {
		ctx = ob.Begin(ctx, step, o)
	}
	return ctx
}

// End calls each observer's End.
func (obs Observers) End(ctx context.Context, step Step, o order.Order, r Result) {
	for _, ob := range obs {
		ob.End(ctx, step, o, r)
	}
}

// Observe calls each observer's Observe.
func (obs Observers) Observe(outcome string, d time.Duration) {
	for _, ob := range obs {
		ob.Observe(outcome, d)
	}
}

// Invoiced tells the observers that are LatencyObservers.
func (obs Observers) Invoiced(sinceAccepted time.Duration) {
	for _, ob := range obs {
		if lo, ok := ob.(LatencyObserver); ok {
			lo.Invoiced(sinceAccepted)
		}
	}
}

// begin tells the observer, if any, that step starts.
func (p *Processor) begin(ctx context.Context, step Step, o order.Order) context.Context {
	if p.Observer == nil {
		return ctx
	}
	return p.Observer.Begin(ctx, step, o)
}

// end tells the observer, if any, what step did.
func (p *Processor) end(ctx context.Context, step Step, o order.Order, r Result) {
	if p.Observer != nil {
		p.Observer.End(ctx, step, o, r)
	}
}

// LockName is the name of o's lock.
func LockName(orderID string) string { return "order:" + orderID }
