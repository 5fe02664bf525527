package gateway

import (
	"context"
	"time"

	"surge/pkg/order"
)

// Step names one call of an order's path that an Observer is told about.
type Step uint8

// The steps of Accept.
const (
	// StepClaim is Claimer.Claim: the customer's rate budget and the
	// idempotency record, in one script.
	StepClaim Step = iota + 1
	// StepReserve is Reserver.Reserve, for a request whose claim made a
	// new record.
	StepReserve
	// StepReserveRetry is Reserver.ReserveRetry, for a retry.
	StepReserveRetry
	// StepUndo is Reserver.Undo: this request takes its reservation back.
	StepUndo
	// StepPublish is Publisher.Publish, until the broker's confirm.
	StepPublish
)

// Result is what a step did: its error (as the adapter returned it) and,
// for the steps that have one, its outcome.
type Result struct {
	Err error
	// Claim is StepClaim's claim.
	Claim order.Claim
	// Reservation is StepReserve's and StepReserveRetry's.
	Reservation order.Reservation
	// Took is StepPublish's time, from just before the publish to the
	// broker's answer.
	Took time.Duration
}

// Answer names an answer the gateway gives without a step of its own.
type Answer uint8

// The answers an Observer is told about.
const (
	// AnswerSoldOutSighted: sold out from a read of the SKU made for the
	// order (SoldOut): no claim, no reserve script, nothing written.
	AnswerSoldOutSighted Answer = iota + 1
	// AnswerOutcomeUnknown: the order may be taken and the gateway cannot
	// know (order.ErrOutcomeUnknown).
	AnswerOutcomeUnknown
)

// Observer is told of each step of an order's path and of the answers
// given without one: metrics, tracing. Service.Observer may be nil.
//
// Begin is called before a step runs, with the order as the step sees it;
// the step runs with the context Begin returns (a span's), and End is
// called with that same context once the step returned. An Observer must
// not hold on to the order or the result after its call returns. Calls
// come from many requests at once.
type Observer interface {
	Begin(ctx context.Context, step Step, o order.Order) context.Context
	End(ctx context.Context, step Step, o order.Order, r Result)
	Answered(ctx context.Context, o order.Order, a Answer)
}

// Observers tells each of its observers, in order. End gets the context
// the last Begin returned.
type Observers []Observer

var _ Observer = Observers(nil)

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

// Answered calls each observer's Answered.
func (obs Observers) Answered(ctx context.Context, o order.Order, a Answer) {
	for _, ob := range obs {
		ob.Answered(ctx, o, a)
	}
}

// begin tells the observer, if any, that step starts.
func (s *Service) begin(ctx context.Context, step Step, o order.Order) context.Context {
	if s.Observer == nil {
		return ctx
	}
	return s.Observer.Begin(ctx, step, o)
}

// end tells the observer, if any, what step did.
func (s *Service) end(ctx context.Context, step Step, o order.Order, r Result) {
	if s.Observer != nil {
		s.Observer.End(ctx, step, o, r)
	}
}

// answered tells the observer, if any, of an answer given without a step.
func (s *Service) answered(ctx context.Context, o order.Order, a Answer) {
	if s.Observer != nil {
		s.Observer.Answered(ctx, o, a)
	}
}
