// Command reconciler keeps Redis honest after failovers. For each SKU it
// compares Redis with MySQL (the truth) and repairs Redis: reservations
// whose order MySQL invoiced are committed, those MySQL rejected are
// released, stock and sold are set to MySQL's and avail is recomputed.
// An order whose reservation outlived the grace period with nothing in
// MySQL is published again (never released: it may be accepted and still
// on its way). Every repair is recorded in MySQL's reconcile_repairs.
//
//	reconciler          serve: reconcile every SKU every SURGE_RECONCILE_EVERY
//	reconciler serve    the same (an asynq scheduler and server on the cluster)
//	reconciler once [--sku S]... [--dry-run] [--json] [--detailed-exitcode]
//	                    one run for cron jobs, with a report on stdout
//	reconciler --version
//
// Exit codes of `once`: 0 every SKU was consistent, or was repaired; 1
// only with --detailed-exitcode: repairs were applied (with --dry-run: are
// needed); 2 a SKU or the run failed (an engine failed, an unknown SKU,
// bad usage); 3 a SKU was busy (another run held it, or live traffic moved
// it during every round): run again later. The report's exit_code is the
// process's.
//
// Settings (SURGE_ variables, besides the engines'): RECONCILE_EVERY
// (30s), RECONCILE_GRACE (5m), RECONCILE_LOOKBACK (15m), RECONCILE_QUEUE
// (reconcile), RECONCILE_METRICS_ADDR (127.0.0.1:9102, served by `serve`:
// sweeps, drift found and repaired, duration, last success). SIGINT or SIGTERM stops the schedule, lets the SKU under
// repair finish, then closes clients.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"surge/pkg/app"
	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/metrics"
	"surge/pkg/queue"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
	"surge/pkg/version"
)

// Config is the reconciler's configuration.
type Config struct {
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if version.IsFlag(args) {
		_ = version.Print(stdout, "reconciler")
		return 0
	}
	if wantsHelp(args) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var cfg Config
	if err := config.Load(&cfg); err != nil {
		fmt.Fprintln(stderr, "reconciler:", err)
		return reconcile.ExitFailed
	}
	log := app.NewLogger(cfg.LogLevel, "reconciler")
	switch {
	case len(args) == 0 || args[0] == "serve":
		if err := serve(ctx, cfg, log); err != nil {
			fmt.Fprintln(stderr, "reconciler:", err)
			return 1
		}
		return 0
	case args[0] == "once":
		return once(ctx, cfg, log, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "reconciler: unknown command %q\n%s", args[0], usage)
	return reconcile.ExitFailed
}

// wantsHelp reports whether the arguments ask for the usage: help, -h or
// --help as the command, or among once's flags. It is answered before the
// configuration is read, so it works wherever the binary is.
func wantsHelp(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return true
	case "once":
		for _, a := range args[1:] {
			if a == "-h" || a == "-help" || a == "--help" {
				return true
			}
		}
	}
	return false
}

const usage = `usage:
  reconciler [serve]        reconcile every SKU on a schedule (SURGE_RECONCILE_EVERY)
  reconciler once [FLAGS]   one run, for cron jobs, with a report on stdout
  reconciler --version      print the version, VCS revision and Go version
flags of once:
  --sku S               reconcile only this SKU (repeatable); default every product
  --dry-run             report what would be repaired, change nothing
  --json                print the report as JSON
  --detailed-exitcode   exit 1 when drift was repaired (with --dry-run: found)
exit codes of once (the report's exit_code says the same):
  0  every SKU was consistent, or was repaired (without --detailed-exitcode)
  1  with --detailed-exitcode: repairs were applied (with --dry-run: are needed)
  2  a SKU or the run failed: an engine failed, an unknown SKU, bad usage
  3  a SKU was busy (another run held it, or live traffic moved it): run again
`

// deps are the engines a reconciler holds; close shuts them.
type deps struct {
	redis *cluster.Client
	db    *store.Store
	mq    *queue.Conn // nil when the broker was not reached (once)
	pub   *queue.Publisher
	rec   *reconcile.Reconciler
}

// open connects to the engines. With needBroker false, a broker that
// cannot be reached leaves the reconciler without a publisher: it still
// repairs, and reports the orders it would publish again as held.
func open(ctx context.Context, cfg Config, log *slog.Logger, needBroker bool) (*deps, error) {
	rdb := cluster.New(cfg.Redis.Options())
	if err := stock.LoadScripts(ctx, rdb.ClusterClient); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis cluster: %w", err)
	}
	db, err := store.Open(ctx, cfg.MySQL.DSN, store.Options{MaxOpenConns: 4, MaxIdleConns: 4})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	d := &deps{redis: rdb, db: db}
	opts := reconcile.Options{Grace: cfg.Grace, Lookback: cfg.Lookback, StateTTL: cfg.IdempotencyTTL, Log: log}
	mq, err := queue.Dial(ctx, cfg.AMQP.URL, queue.WithConnectionName("surge-reconciler"), queue.WithLogger(log))
	switch {
	case err == nil:
		d.mq = mq
		if d.pub, err = queue.NewPublisher(mq, cfg.AMQP.Topology(), queue.PublisherOptions{Channels: 1}); err != nil {
			d.close()
			return nil, err
		}
		opts.Publisher = d.pub
	case needBroker:
		d.close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	default:
		log.Warn("rabbitmq unreachable: orders past the grace period are reported, not published again", "err", err)
	}
	d.rec = reconcile.New(rdb.ClusterClient, reconcile.StoreLedger{Store: db}, opts)
	return d, nil
}

func (d *deps) close() {
	if d.pub != nil {
		_ = d.pub.Close()
	}
	if d.mq != nil {
		_ = d.mq.Close()
	}
	_ = d.db.Close()
	_ = d.redis.Close()
}

// serve runs the schedule until ctx ends, then stops the scheduler, lets
// the sweep in progress stop between two SKUs, and closes the engines.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	var ep *metrics.Endpoint
	if cfg.MetricsAddr != "" {
		var err error
		if ep, err = metrics.Listen(cfg.MetricsAddr); err != nil {
			return err
		}
		defer ep.Close()
		go func() {
			if err := ep.Serve(ctx); err != nil {
				log.Error("metrics endpoint stopped", "err", err)
			}
		}()
		log.Info("metrics listening", "addr", ep.Addr())
	}
	d, err := open(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer d.close()
	svc := reconcile.NewService(d.redis.ClusterClient, d.rec, reconcile.ServiceOptions{
		Every: cfg.Every, Queue: cfg.Queue, Log: log, OnSweep: metrics.ReconcileReport,
	})
	return svc.Run(ctx)
}
