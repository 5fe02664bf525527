package metrics

import (
	"context"
	"time"
)

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
