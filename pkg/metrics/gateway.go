package metrics

import (
	"context"
	"errors"

	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// Reservation outcomes.
const (
	ReservationReserved = "reserved"
	ReservationRepeat   = "repeat"
	ReservationSoldOut  = "sold_out"
	// ReservationPurchaseLimit: refused for the SKU's purchase limit per
	// customer (units were left).
	ReservationPurchaseLimit = "purchase_limit"
	ReservationNotLoaded     = "not_loaded"
	ReservationError         = "error"
	// ReservationSoldOutCached is a sold-out answer the gateway gave from
	// a read of the SKU made for the order (gateway.SoldOut), without a
	// claim or the reserve script. The label keeps its first name, which
	// dashboards know.
	ReservationSoldOutCached = "sold_out_cached"
)

// Publish results.
const (
	PublishConfirmed = "confirmed"
	PublishNacked    = "nacked"
	PublishReturned  = "returned"
	PublishTimeout   = "timeout"
	PublishBlocked   = "blocked"
	PublishUnknown   = "unknown"
	PublishError     = "error"
)

// GatewayObserver counts what the gateway tells its observer: claims (as
// rate-limit decisions), reservations by outcome, undos, publishes by the
// broker's answer and their time, sold-out answers from the hint and
// unknown outcomes. It implements gateway.Observer.
type GatewayObserver struct {
	// CustomerLimited: the claim spends the customer's rate budget, and
	// each claim counts as a decision of the scope "customer".
	CustomerLimited bool
}

var _ gateway.Observer = GatewayObserver{}

// Begin does nothing: the counts need only the result.
func (GatewayObserver) Begin(ctx context.Context, _ gateway.Step, _ order.Order) context.Context {
	return ctx
}

// End counts one step's result.
func (g GatewayObserver) End(_ context.Context, step gateway.Step, _ order.Order, r gateway.Result) {
	switch step {
	case gateway.StepClaim:
		if g.CustomerLimited {
			rateLimited.WithLabelValues("customer", customerDecision(r.Err)).Inc()
		}
	case gateway.StepReserve, gateway.StepReserveRetry:
		reservations.WithLabelValues(reservationOutcome(r.Reservation, r.Err)).Inc()
	case gateway.StepUndo:
		releases.WithLabelValues("undo", undoResult(r.Err)).Inc()
	case gateway.StepPublish:
		publishDuration.Observe(r.Took.Seconds())
		publishes.WithLabelValues(publishResult(r.Err)).Inc()
	}
}

// Answered counts a sold-out answer from a sighting (as a reservation
// outcome) or an unknown outcome.
func (GatewayObserver) Answered(_ context.Context, _ order.Order, a gateway.Answer) {
	switch a {
	case gateway.AnswerSoldOutSighted:
		reservations.WithLabelValues(ReservationSoldOutCached).Inc()
	case gateway.AnswerOutcomeUnknown:
		outcomeUnknown.Inc()
	}
}

// customerDecision names the rate-limit decision a claim made: limited
// when it refused with order.ErrRateLimited, error when Redis failed,
// allowed otherwise (a reused key with another body, or a retry of an
// order answered sold out or whose outcome is unknown, passed the limit).
func customerDecision(err error) string {
	switch {
	case errors.Is(err, order.ErrRateLimited):
		return "limited"
	case err != nil && !errors.Is(err, order.ErrIdempotencyMismatch) && !errors.Is(err, order.ErrSoldOut) &&
		!errors.Is(err, order.ErrOutcomeUnknown):
		return "error"
	}
	return "allowed"
}

func reservationOutcome(res order.Reservation, err error) string {
	switch {
	case res.Repeat:
		return ReservationRepeat
	case err == nil:
		return ReservationReserved
	case errors.Is(err, order.ErrSoldOut):
		return ReservationSoldOut
	case errors.Is(err, order.ErrPurchaseLimit):
		return ReservationPurchaseLimit
	case errors.Is(err, order.ErrNotLoaded):
		return ReservationNotLoaded
	}
	return ReservationError
}

// undoResult names an undo's result: "ok", "kept" (the reservation was
// not this request's to undo: the outcome is unknown) or "error".
func undoResult(err error) string {
	switch {
	case errors.Is(err, order.ErrNotYours), errors.Is(err, order.ErrCommitted):
		return "kept"
	case err != nil:
		return "error"
	}
	return "ok"
}

// publishResult names queue.Publisher's typed failures.
func publishResult(err error) string {
	switch {
	case err == nil:
		return PublishConfirmed
	case errors.Is(err, queue.ErrNacked):
		return PublishNacked
	case errors.Is(err, queue.ErrReturned):
		return PublishReturned
	case errors.Is(err, queue.ErrBlocked):
		return PublishBlocked
	case errors.Is(err, queue.ErrConfirmTimeout):
		return PublishTimeout
	case errors.Is(err, order.ErrOutcomeUnknown):
		return PublishUnknown
	}
	return PublishError
}

// PublishedBatch records one message the gateway's publisher sent and how
// many orders it held; it is queue.PublisherOptions.Sent.
func PublishedBatch(orders int) { publishBatch.Observe(float64(orders)) }
