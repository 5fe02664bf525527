package app

import (
	"context"
	"log/slog"
	"time"

	"surge/pkg/admin"
	"surge/pkg/config"
	"surge/pkg/metrics"
	"surge/pkg/queue"
	"surge/pkg/reconcile"
)

// ReconcilerConfig is the reconciler's configuration.
type ReconcilerConfig struct {
	config.Common
	// Reconcile holds SURGE_RECONCILE_GRACE (5m) and
	// SURGE_RECONCILE_LOOKBACK (15m), shared with opsctl and the admin API.
	config.Reconcile
	// Every is the interval between two scheduled sweeps:
	// SURGE_RECONCILE_EVERY, default 30s.
	Every time.Duration `envconfig:"RECONCILE_EVERY" default:"30s"`
	// Queue is the asynq queue of the sweeps: SURGE_RECONCILE_QUEUE,
	// default reconcile.
	Queue string `envconfig:"RECONCILE_QUEUE" default:"reconcile"`
	// MetricsAddr serves GET /metrics while the schedule runs (sweeps,
	// drift found and repaired, duration, last success):
	// SURGE_RECONCILE_METRICS_ADDR, default 127.0.0.1:9102; empty serves
	// none.
	MetricsAddr string `envconfig:"RECONCILE_METRICS_ADDR" default:"127.0.0.1:9102"`
}

// Validate checks the common settings, then refuses an idempotency TTL
// shorter than the floor the grace sets: the orders this reconciler
// publishes again after their grace must still be named by their key's
// record.
func (c *ReconcilerConfig) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	return config.CheckIdempotencyTTL(c.IdempotencyTTL, c.Reconcile.Horizon())
}

// Reconciler is the running reconciler: the schedule (Serve) or one run
// (Once).
type Reconciler struct {
	cfg  ReconcilerConfig
	log  *slog.Logger
	eng  *engines
	pub  *queue.Publisher // nil without a broker (Once only)
	rec  *reconcile.Reconciler
	mets *metrics.Endpoint // nil without MetricsAddr, and for Once
}

// NewReconciler opens the engines with the one opener the gateway and the
// worker use. For the schedule (oneOff false) the broker must answer and
// the metrics listener opens; a one-off run goes on without the broker and
// reports the orders it would have published again as held.
func NewReconciler(ctx context.Context, cfg ReconcilerConfig, log *slog.Logger, oneOff bool) (*Reconciler, error) {
	eng, err := openEngines(ctx, cfg.Common, "reconciler", log, needs{brokerOptional: oneOff, noDeclare: true})
	if err != nil {
		return nil, err
	}
	r := &Reconciler{cfg: cfg, log: log, eng: eng}
	opts := reconcile.Options{Grace: cfg.Grace, Lookback: cfg.Lookback, StateTTL: cfg.IdempotencyTTL, Log: log}
	if eng.mq != nil {
		if r.pub, err = queue.NewPublisher(eng.mq, cfg.AMQP.Topology(), queue.PublisherOptions{Channels: 1}); err != nil {
			r.close()
			return nil, err
		}
		opts.Publisher = r.pub
	}
	r.rec = reconcile.New(eng.redis.ClusterClient, reconcile.StoreLedger{Store: eng.db}, opts)
	if !oneOff && cfg.MetricsAddr != "" {
		if r.mets, err = metrics.Listen(cfg.MetricsAddr); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// Serve runs the schedule until ctx ends, then shuts down: stop the
// scheduler, let the sweep in progress stop between two SKUs, stop the
// metrics listener, close the publisher, then the engines.
func (r *Reconciler) Serve(ctx context.Context) error {
	stopMetrics := serveMetrics(ctx, r.mets, r.log)
	svc := reconcile.NewService(r.eng.redis.ClusterClient, r.rec, reconcile.ServiceOptions{
		Every: r.cfg.Every, Queue: r.cfg.Queue, Log: r.log, OnSweep: metrics.ReconcileReport,
	})
	err := svc.Run(ctx)
	stopMetrics()
	r.close()
	return err
}

// Once reconciles skus (every product when none), or reports what it
// would repair with dryRun, then closes the engines.
func (r *Reconciler) Once(ctx context.Context, dryRun bool, skus ...string) admin.ReconcileReport {
	rep := r.rec.Run(ctx, dryRun, skus...)
	r.close()
	return rep
}

func (r *Reconciler) close() {
	if r.pub != nil {
		_ = r.pub.Close()
	}
	r.eng.close()
}
