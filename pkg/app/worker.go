package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"surge/pkg/config"
	"surge/pkg/lock"
	"surge/pkg/metrics"
	"surge/pkg/productview"
	"surge/pkg/queue"
	"surge/pkg/stock"
	"surge/pkg/store"
	"surge/pkg/telemetry"
	"surge/pkg/worker"
)

// WorkerConfig is the worker's configuration (SURGE_ variables).
type WorkerConfig struct {
	config.Common
	// Prefetch is SURGE_WORKER_PREFETCH, default 2048: enough unacked
	// orders in hand to keep every handler busy and fill large batches.
	Prefetch int `envconfig:"WORKER_PREFETCH" default:"2048"`
	// Concurrency is the pool size: SURGE_WORKER_CONCURRENCY, default
	// 1024. Handlers are cheap: most of their time is spent waiting for
	// the batch their order joined and for the Redis calls around it, and
	// batches only grow as large as the handlers waiting on them. In make
	// bench's sustained run, 512 handlers invoiced 88-93% of the accepted
	// orders during the load and the queue drained 1.6-2.1 s after it;
	// 1024 invoiced 99% and drained in 0.15-0.17 s (back-to-back runs).
	Concurrency int `envconfig:"WORKER_CONCURRENCY" default:"1024"`
	// BatchMax caps the orders per MySQL transaction:
	// SURGE_WORKER_BATCH_MAX, default 256; 1 disables batching.
	BatchMax int `envconfig:"WORKER_BATCH_MAX" default:"256"`
	// BatchLinger is how long a batch waits for more orders:
	// SURGE_WORKER_BATCH_LINGER, default 1ms.
	BatchLinger time.Duration `envconfig:"WORKER_BATCH_LINGER" default:"1ms"`
	// OrderTimeout bounds one order's processing, after which it is
	// retried through the tiers: SURGE_WORKER_ORDER_TIMEOUT, default 10s.
	OrderTimeout time.Duration `envconfig:"WORKER_ORDER_TIMEOUT" default:"10s"`
	// LockTTL is the lease of an order's lock, renewed while the order is
	// processed: SURGE_WORKER_LOCK_TTL, default 10s.
	LockTTL time.Duration `envconfig:"WORKER_LOCK_TTL" default:"10s"`
	// MetricsAddr serves GET /metrics: SURGE_WORKER_METRICS_ADDR, default
	// 127.0.0.1:9101; empty serves none.
	MetricsAddr string `envconfig:"WORKER_METRICS_ADDR" default:"127.0.0.1:9101"`
	// LivenessGrace is how long the worker may have no subscription to
	// the work queue before its /healthz fails (503), so that a liveness
	// probe restarts a worker that runs but consumes nothing:
	// SURGE_WORKER_LIVENESS_GRACE, default 2m, longer than a broker
	// failover the consumer re-subscribes after by itself.
	LivenessGrace time.Duration `envconfig:"WORKER_LIVENESS_GRACE" default:"2m"`
	// Tracing is the test's span recorder, if any (SURGE_OTLP_ENDPOINT
	// is in Common).
	Tracing
}

// Worker is the running worker pool.
type Worker struct {
	cfg  WorkerConfig
	log  *slog.Logger
	eng  *engines
	cons *queue.Consumer
	proc *worker.Processor
	// batcher coalesces the handlers' transactions; nil when disabled.
	batcher *store.Batcher
	// products refreshes cached product views in the background.
	products *productview.Views
	mets     *metrics.Endpoint // nil without MetricsAddr
	tel      *telemetry.Tracing
}

// NewWorker opens the engines, declares the topology and builds the
// consumer and the processor.
func NewWorker(ctx context.Context, cfg WorkerConfig, log *slog.Logger) (*Worker, error) {
	eng, err := openEngines(ctx, cfg.Common, "worker", log, needs{})
	if err != nil {
		return nil, err
	}
	var ledger worker.Ledger = eng.db
	var batcher *store.Batcher
	if cfg.BatchMax > 1 {
		batcher = store.NewBatcher(eng.db, store.BatcherOptions{MaxBatch: cfg.BatchMax, Linger: cfg.BatchLinger})
		ledger = batcher
		metrics.WorkerBatcher(batcher.Stats)
	}
	tel, err := setupTracing(ctx, cfg.OTLPEndpoint, cfg.Tracing, "surge-worker", log)
	if err != nil {
		if batcher != nil {
			batcher.Close()
		}
		eng.close()
		return nil, err
	}
	proc := worker.New(worker.Processor{
		Ledger:   ledger,
		Stock:    stock.NewCommitter(stock.New(eng.fast, stock.Options{StateTTL: cfg.IdempotencyTTL}), stock.CommitterOptions{}),
		Lock:     newOrderLocker(eng.fast, cfg.LockTTL),
		Log:      log,
		Timeout:  cfg.OrderTimeout,
		Observer: workerObserver(tel),
	})
	prods := newProducts(eng.fast, eng.db, 0, log)
	proc.Cache = prods
	cons := queue.NewConsumer(eng.mq, cfg.AMQP.Topology(), queue.ConsumerOptions{
		Prefetch: cfg.Prefetch, Concurrency: cfg.Concurrency, Logger: log,
	})
	w := &Worker{cfg: cfg, log: log, eng: eng, cons: cons, proc: proc, batcher: batcher, products: prods, tel: tel}
	if cfg.MetricsAddr != "" {
		if w.mets, err = metrics.Listen(cfg.MetricsAddr); err != nil {
			if batcher != nil {
				batcher.Close()
			}
			prods.Close()
			eng.close()
			_ = tel.ShutdownWithin(tracingShutdownTimeout)
			return nil, err
		}
		w.mets.SetHealth(func() error { return cons.Health(cfg.LivenessGrace) })
	}
	return w, nil
}

// MetricsAddr is the address the worker's /metrics and /healthz listen
// on ("" without a metrics listener).
func (w *Worker) MetricsAddr() string {
	if w.mets == nil {
		return ""
	}
	return w.mets.Addr()
}

// Run consumes until ctx ends, then shuts down: stop intake, finish
// in-flight orders (each acked after its commit), then close the engines.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("worker consuming", "queue", w.cfg.AMQP.Topology().Queue, "concurrency", w.cfg.Concurrency)
	stopMetrics := serveMetrics(ctx, w.mets, w.log)
	handle := queue.Handler(func(ctx context.Context, d *queue.Delivery) { w.proc.Handle(ctx, d) })
	if w.tel.Enabled() {
		handle = w.tel.Consume(w.cfg.AMQP.Topology().Queue, handle)
	}
	err := w.cons.Run(ctx, handle)
	stopMetrics()
	if w.batcher != nil {
		w.batcher.Close() // after the consumer drained: no order is waiting
	}
	w.products.Close() // the last refreshes, before Redis closes
	w.eng.close()
	if terr := w.tel.ShutdownWithin(tracingShutdownTimeout); terr != nil {
		w.log.Warn("export the last spans", "err", terr)
	}
	return err
}

// workerObserver counts the worker's outcomes and lock attempts (a lock
// another delivery holds counts as contended) and, when tracing is on,
// traces its steps; off, the worker carries no tracing code at all.
func workerObserver(tel *telemetry.Tracing) worker.Observer {
	counted := metrics.WorkerObserver{Contended: lockContended}
	if !tel.Enabled() {
		return counted
	}
	return worker.Observe(counted, telemetry.WorkerObserver{T: tel})
}

func lockContended(err error) bool { return errors.Is(err, lock.ErrNotObtained) }
