package app

import (
	"context"
	"log/slog"
	"time"

	"surge/pkg/config"
	"surge/pkg/metrics"
	"surge/pkg/queue"
	"surge/pkg/stock"
	"surge/pkg/worker"
)

// WorkerConfig is the worker's configuration (SURGE_ variables).
type WorkerConfig struct {
	config.Common
	// Prefetch is SURGE_WORKER_PREFETCH, default 128.
	Prefetch int `envconfig:"WORKER_PREFETCH" default:"128"`
	// Concurrency is the pool size: SURGE_WORKER_CONCURRENCY, default 32.
	Concurrency int `envconfig:"WORKER_CONCURRENCY" default:"32"`
	// OrderTimeout bounds one order's processing, after which it is
	// retried through the tiers: SURGE_WORKER_ORDER_TIMEOUT, default 10s.
	OrderTimeout time.Duration `envconfig:"WORKER_ORDER_TIMEOUT" default:"10s"`
	// LockTTL is the lease of an order's lock, renewed while the order is
	// processed: SURGE_WORKER_LOCK_TTL, default 10s.
	LockTTL time.Duration `envconfig:"WORKER_LOCK_TTL" default:"10s"`
	// MetricsAddr serves GET /metrics: SURGE_WORKER_METRICS_ADDR, default
	// 127.0.0.1:9101; empty serves none.
	MetricsAddr string `envconfig:"WORKER_METRICS_ADDR" default:"127.0.0.1:9101"`
}

// Worker is the running worker pool.
type Worker struct {
	cfg  WorkerConfig
	log  *slog.Logger
	eng  *engines
	cons *queue.Consumer
	proc *worker.Processor
	mets *metrics.Endpoint // nil without MetricsAddr
}

// NewWorker opens the engines, declares the topology and builds the
// consumer and the processor.
func NewWorker(ctx context.Context, cfg WorkerConfig, log *slog.Logger) (*Worker, error) {
	eng, err := openEngines(ctx, cfg.Common, "worker", log)
	if err != nil {
		return nil, err
	}
	proc := &worker.Processor{
		Ledger:   eng.db,
		Stock:    stock.New(eng.redis, stock.Options{StateTTL: cfg.IdempotencyTTL}),
		Log:      log,
		Timeout:  cfg.OrderTimeout,
		Observer: metrics.WorkerObserver{},
	}
	proc.Lock = newOrderLocker(eng.redis, cfg.LockTTL)
	proc.Cache = newProducts(eng.redis, eng.db, 0, log)
	cons := queue.NewConsumer(eng.mq, cfg.AMQP.Topology(), queue.ConsumerOptions{
		Prefetch: cfg.Prefetch, Concurrency: cfg.Concurrency, Logger: log,
	})
	w := &Worker{cfg: cfg, log: log, eng: eng, cons: cons, proc: proc}
	if cfg.MetricsAddr != "" {
		if w.mets, err = metrics.Listen(cfg.MetricsAddr); err != nil {
			eng.close()
			return nil, err
		}
	}
	return w, nil
}

// Run consumes until ctx ends, then shuts down: stop intake, finish
// in-flight orders (each acked after its commit), then close the engines.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("worker consuming", "queue", w.cfg.AMQP.Topology().Queue, "concurrency", w.cfg.Concurrency)
	stopMetrics := serveMetrics(ctx, w.mets, w.log)
	err := w.cons.Run(ctx, func(ctx context.Context, d *queue.Delivery) { w.proc.Handle(ctx, d) })
	stopMetrics()
	w.eng.close()
	return err
}
