package metrics

import (
	"context"
	"surge/pkg/order"
	"surge/pkg/worker"
	"time"
)

// WorkerObserver records worker outcomes and processing time, and each
// attempt to take an order's lock; it implements worker.Observer.
// Retried and dead outcomes also count as retries and dead letters.
type WorkerObserver struct {
	// Contended tells a lock held by another owner from other failures;
	// nil counts every failure as an error.
	Contended func(error) bool
}

var (
	_ worker.Observer        = WorkerObserver{}
	_ worker.LatencyObserver = WorkerObserver{}
)

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

// Begin does nothing: the counts need only the result.
func (WorkerObserver) Begin(ctx context.Context, _ worker.Step, _ order.Order) context.Context {
	return ctx
}

// End records a lock attempt; the other steps are counted by the
// delivery's outcome.
func (w WorkerObserver) End(_ context.Context, step worker.Step, _ order.Order, r worker.Result) {
	if step != worker.StepLock {
		return
	}
	result := LockAcquired
	switch {
	case r.Err != nil && w.Contended != nil && w.Contended(r.Err):
		result = LockContended
	case r.Err != nil:
		result = LockError
	}
	lockAttempt(result, r.Took)
}
