package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"surge/pkg/admin"
)

// TaskSweep is the asynq task type of one scheduled run over every SKU.
const TaskSweep = "reconcile:sweep"

// ServiceOptions tunes a Service. The zero value of each field means its
// default.
type ServiceOptions struct {
	// Every is the interval between two sweeps. Default 30s.
	Every time.Duration
	// Queue is the asynq queue the sweeps go through; its name is the
	// hash tag of asynq's keys in the cluster. Default "reconcile".
	Queue string
	// Log defaults to slog.Default().
	Log *slog.Logger
	// OnSweep, when set, is told each sweep's report (metrics).
	OnSweep func(admin.ReconcileReport)
}

func (o *ServiceOptions) setDefaults() {
	if o.Every <= 0 {
		o.Every = 30 * time.Second
	}
	if o.Queue == "" {
		o.Queue = "reconcile"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Service reconciles every SKU on a schedule: an asynq scheduler enqueues a
// sweep every Every, unique so sweeps never pile up, and an asynq server
// with one worker runs it, one SKU at a time under the SKU's lock. Several
// reconciler processes may run: the unique task and the SKU locks keep
// their work from overlapping.
type Service struct {
	rec  *Reconciler
	srv  *asynq.Server
	sch  *asynq.Scheduler
	opts ServiceOptions
}

var _ asynq.Handler = (*Service)(nil)

// NewService builds the scheduler and the server on rdb (the tuned
// cluster client in surge; it stays the caller's to close).
func NewService(rdb redis.UniversalClient, rec *Reconciler, opts ServiceOptions) *Service {
	opts.setDefaults()
	alog := asynqLog{opts.Log}
	s := &Service{rec: rec, opts: opts}
	s.srv = asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 1,
		Queues:      map[string]int{opts.Queue: 1},
		Logger:      alog,
		LogLevel:    asynq.WarnLevel,
		// A sweep stops between two SKUs when asked to; the SKU under
		// repair finishes within a few round trips.
		ShutdownTimeout: 10 * time.Second,
	})
	s.sch = asynq.NewSchedulerFromRedisClient(rdb, &asynq.SchedulerOpts{
		Logger:   alog,
		LogLevel: asynq.WarnLevel,
		PostEnqueueFunc: func(_ *asynq.TaskInfo, err error) {
			switch {
			case err == nil:
				return
			case errors.Is(err, asynq.ErrDuplicateTask):
				opts.Log.Debug("previous reconcile sweep still pending or running")
				return
			}
			opts.Log.Warn("enqueue reconcile sweep", "err", err)
		},
	})
	return s
}

// Run registers the schedule, starts the server and the scheduler and
// blocks until ctx ends. Shutdown stops the scheduler first (no new
// sweeps), then the server, which cancels the sweep in progress between
// two SKUs.
func (s *Service) Run(ctx context.Context) error {
	task := asynq.NewTask(TaskSweep, nil)
	_, err := s.sch.Register(fmt.Sprintf("@every %s", s.opts.Every), task,
		asynq.Queue(s.opts.Queue), asynq.Unique(s.opts.Every), asynq.MaxRetry(0))
	if err != nil {
		return fmt.Errorf("register reconcile schedule: %w", err)
	}
	if err := s.srv.Start(s); err != nil {
		return fmt.Errorf("start reconcile server: %w", err)
	}
	if err := s.sch.Start(); err != nil {
		s.srv.Shutdown()
		return fmt.Errorf("start reconcile scheduler: %w", err)
	}
	s.opts.Log.Info("reconciler scheduled", "every", s.opts.Every, "queue", s.opts.Queue)
	<-ctx.Done()
	s.sch.Shutdown()
	s.srv.Shutdown()
	return nil
}

// ProcessTask runs one sweep over every SKU. Failures are per SKU, logged
// and left to the next sweep, so the task itself only fails when it was
// cancelled.
func (s *Service) ProcessTask(ctx context.Context, t *asynq.Task) error {
	if t.Type() != TaskSweep {
		return fmt.Errorf("reconciler: unknown task type %q: %w", t.Type(), asynq.SkipRetry)
	}
	rep := s.rec.Run(ctx, false)
	if s.opts.OnSweep != nil {
		s.opts.OnSweep(rep)
	}
	s.opts.Log.Info("reconcile sweep", "skus", len(rep.SKUs), "consistent", rep.Summary[admin.SKUConsistent],
		"repaired", rep.Summary[admin.SKURepaired], "busy", rep.Summary[admin.SKUBusy], "failed", rep.Summary[admin.SKUFailed],
		"took", rep.FinishedAt.Sub(rep.StartedAt))
	for what, msg := range rep.Errors {
		s.opts.Log.Warn("reconcile sweep", "step", what, "err", msg)
	}
	return ctx.Err()
}

// asynqLog routes asynq's own logging to slog.
type asynqLog struct{ l *slog.Logger }

func (a asynqLog) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLog) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLog) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }

// Error logs at error level, except asynq's complaint at shutdown that it
// may not close a client it was given: that client is ours to close.
func (a asynqLog) Error(args ...any) {
	msg := fmt.Sprint(args...)
	if strings.Contains(msg, "connection is shared") {
		a.l.Debug(msg, "component", "asynq")
		return
	}
	a.l.Error(msg, "component", "asynq")
}

// Fatal logs and exits, as asynq's Logger contract requires.
func (a asynqLog) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq")
	os.Exit(1)
}
