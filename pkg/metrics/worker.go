package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"surge/pkg/order"
	"surge/pkg/worker"
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

// batchStats reads the worker's MySQL batcher (store.Batcher.Stats): the
// transactions it ran and the orders in them. Nil until WorkerBatcher.
var batchStats atomic.Pointer[func() (batches, orders int64)]

var (
	workerBatches = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "worker_mysql_batches_total",
		Help: "MySQL transactions the worker's batcher ran; surge_worker_mysql_batch_orders_total divided by it is the orders per transaction.",
	}, func() float64 { b, _ := readBatchStats(); return float64(b) })
	workerBatchOrders = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "worker_mysql_batch_orders_total",
		Help: "Orders the worker's batcher sent MySQL, summed over its transactions.",
	}, func() float64 { _, o := readBatchStats(); return float64(o) })
)

// WorkerBatcher has the batch counters read stats (a worker's
// store.Batcher.Stats). The last call wins: one worker per process.
func WorkerBatcher(stats func() (batches, orders int64)) { batchStats.Store(&stats) }

func readBatchStats() (batches, orders int64) {
	if f := batchStats.Load(); f != nil {
		return (*f)()
	}
	return 0, 0
}
