package metrics

import (
	"context"
	"errors"
	"time"

	"surge/pkg/order"
	"surge/pkg/queue"
)

// Reservation outcomes.
const (
	ReservationReserved  = "reserved"
	ReservationRepeat    = "repeat"
	ReservationSoldOut   = "sold_out"
	ReservationNotLoaded = "not_loaded"
	ReservationError     = "error"
	// ReservationSoldOutCached is a sold-out answer the gateway gave from
	// its recent view of the SKU, without running the reserve script.
	ReservationSoldOutCached = "sold_out_cached"
)

// SoldOutCached counts one sold-out answer given without the reserve
// script.
func SoldOutCached() { reservations.WithLabelValues(ReservationSoldOutCached).Inc() }

// OutcomeUnknown counts one order answered outcome_unknown.
func OutcomeUnknown() { outcomeUnknown.Inc() }

// StockReserver is what the gateway reserves with. *stock.Stock
// implements it.
type StockReserver interface {
	Reserve(ctx context.Context, o order.Order) (order.Reservation, error)
	ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error)
	Undo(ctx context.Context, sku, orderID, nonce string) (int, error)
}

// Reserver counts reservations by outcome and the gateway's undos around
// Next.
type Reserver struct{ Next StockReserver }

var _ StockReserver = Reserver{}

// Reserve calls Next.Reserve and counts its outcome.
func (r Reserver) Reserve(ctx context.Context, o order.Order) (order.Reservation, error) {
	return countReservation(r.Next.Reserve(ctx, o))
}

// ReserveRetry calls Next.ReserveRetry and counts its outcome.
func (r Reserver) ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error) {
	return countReservation(r.Next.ReserveRetry(ctx, o))
}

func countReservation(res order.Reservation, err error) (order.Reservation, error) {
	reservations.WithLabelValues(reservationOutcome(res, err)).Inc()
	return res, err
}

func reservationOutcome(res order.Reservation, err error) string {
	switch {
	case res.Repeat:
		return ReservationRepeat
	case err == nil:
		return ReservationReserved
	case errors.Is(err, order.ErrSoldOut):
		return ReservationSoldOut
	case errors.Is(err, order.ErrNotLoaded):
		return ReservationNotLoaded
	}
	return ReservationError
}

// Undo calls Next.Undo and counts it: "ok", "kept" (the reservation was
// not this request's to undo: the outcome is unknown) or "error".
func (r Reserver) Undo(ctx context.Context, sku, orderID, nonce string) (int, error) {
	n, err := r.Next.Undo(ctx, sku, orderID, nonce)
	result := "ok"
	switch {
	case errors.Is(err, order.ErrNotYours), errors.Is(err, order.ErrCommitted):
		result = "kept"
	case err != nil:
		result = "error"
	}
	releases.WithLabelValues("undo", result).Inc()
	return n, err
}

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

// OrderPublisher publishes an order and returns once the broker confirmed
// it. *queue.Publisher implements it.
type OrderPublisher interface {
	Publish(ctx context.Context, o order.Order) error
}

// Publisher counts publishes by the broker's answer and times them.
type Publisher struct{ Next OrderPublisher }

var _ OrderPublisher = Publisher{}

// Publish calls Next.Publish and records the result.
func (p Publisher) Publish(ctx context.Context, o order.Order) error {
	start := time.Now()
	err := p.Next.Publish(ctx, o)
	publishDuration.Observe(time.Since(start).Seconds())
	publishes.WithLabelValues(publishResult(err)).Inc()
	return err
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

// WorkerObserver records worker outcomes and processing time; it
// implements worker.Observer. Retried and dead outcomes also count as
// retries and dead letters.
type WorkerObserver struct{}

// Invoiced records how long an invoiced order took from its acceptance.
func (WorkerObserver) Invoiced(sinceAccepted time.Duration) {
	acceptedToInvoiced.Observe(sinceAccepted.Seconds())
}

// Observe records one handled delivery.
func (WorkerObserver) Observe(outcome string, d time.Duration) {
	workerOrders.WithLabelValues(outcome).Inc()
	workerDuration.WithLabelValues(outcome).Observe(d.Seconds())
	switch outcome {
	case "retried":
		retries.Inc()
	case "dead":
		deadLetters.Inc()
	}
}

// OrderLocker is worker.Locker's method.
type OrderLocker interface {
	Lock(ctx context.Context, name string) (fence int64, held context.Context, release func(), err error)
}

// Locker records lock attempts around Next. Contended tells a lock held
// by another owner from other failures; nil counts every failure as an
// error.
type Locker struct {
	Next      OrderLocker
	Contended func(error) bool
}

var _ OrderLocker = Locker{}

// Lock calls Next.Lock and records the attempt.
func (l Locker) Lock(ctx context.Context, name string) (int64, context.Context, func(), error) {
	start := time.Now()
	fence, held, release, err := l.Next.Lock(ctx, name)
	result := LockAcquired
	switch {
	case err != nil && l.Contended != nil && l.Contended(err):
		result = LockContended
	case err != nil:
		result = LockError
	}
	LockAttempt(result, time.Since(start))
	return fence, held, release, err
}

// RateLimiter decides whether subject may make one more request.
// *ratelimit.Limiter implements it.
type RateLimiter interface {
	Allow(ctx context.Context, subject string) (allowed bool, retryAfter time.Duration, err error)
}

// Limiter counts rate-limit decisions of one scope ("customer", "ip").
type Limiter struct {
	Scope string
	Next  RateLimiter
}

var _ RateLimiter = Limiter{}

// Allow calls Next.Allow and counts the decision.
func (l Limiter) Allow(ctx context.Context, subject string) (bool, time.Duration, error) {
	ok, after, err := l.Next.Allow(ctx, subject)
	decision := "allowed"
	switch {
	case err != nil:
		decision = "error"
	case !ok:
		decision = "limited"
	}
	rateLimited.WithLabelValues(l.Scope, decision).Inc()
	return ok, after, err
}

// OrderClaimer spends a customer's budget and claims an order's
// idempotency record in one call. *idem.Records implements it.
type OrderClaimer interface {
	Claim(ctx context.Context, o order.Order, key string, soldOut bool) (order.Claim, error)
	Existing(ctx context.Context, o order.Order, key string) (orderID string, open bool, err error)
	Forget(ctx context.Context, c order.Claim) (bool, error)
	Unmark(ctx context.Context, c order.Claim) (bool, error)
}

// CustomerLimited counts the customer rate-limit decisions Next makes
// inside Claim, under the scope "customer" as Limiter would.
type CustomerLimited struct {
	Next OrderClaimer
}

var _ OrderClaimer = CustomerLimited{}

// Claim calls Next.Claim and counts its rate-limit decision: limited when
// it refused with order.ErrRateLimited, error when Redis failed, allowed
// otherwise (a reused key with another body, or a retry of an order
// answered sold out, passed the limit).
func (c CustomerLimited) Claim(ctx context.Context, o order.Order, key string, soldOut bool) (order.Claim, error) {
	claim, err := c.Next.Claim(ctx, o, key, soldOut)
	decision := "allowed"
	switch {
	case errors.Is(err, order.ErrRateLimited):
		decision = "limited"
	case err != nil && !errors.Is(err, order.ErrIdempotencyMismatch) && !errors.Is(err, order.ErrSoldOut) &&
		!errors.Is(err, order.ErrOutcomeUnknown):
		decision = "error"
	}
	rateLimited.WithLabelValues("customer", decision).Inc()
	return claim, err
}

// Existing calls Next.Existing.
func (c CustomerLimited) Existing(ctx context.Context, o order.Order, key string) (string, bool, error) {
	return c.Next.Existing(ctx, o, key)
}

// Forget calls Next.Forget.
func (c CustomerLimited) Forget(ctx context.Context, claim order.Claim) (bool, error) {
	return c.Next.Forget(ctx, claim)
}

// Unmark calls Next.Unmark.
func (c CustomerLimited) Unmark(ctx context.Context, claim order.Claim) (bool, error) {
	return c.Next.Unmark(ctx, claim)
}
