// Command worker consumes accepted orders and writes order + invoice to
// MySQL exactly once per order, then settles the reservation in Redis.
//
//	worker           consume SURGE_AMQP_QUEUE (default orders.created)
//	worker migrate   apply the MySQL migrations and exit
//
// SIGINT or SIGTERM stops intake, finishes in-flight orders (each acked
// after its commit), then closes clients.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/profile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var cfg app.WorkerConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	log := app.NewLogger(cfg.LogLevel, "worker")
	switch {
	case len(args) == 0 || args[0] == "run":
		if err := serveProfiles(ctx, log); err != nil {
			return err
		}
		w, err := app.NewWorker(ctx, cfg, log)
		if err != nil {
			return err
		}
		return w.Run(ctx)
	case args[0] == "migrate":
		return app.Migrate(ctx, cfg.MySQL.DSN, os.Stdout)
	}
	return fmt.Errorf("unknown command %q (want run or migrate)", args[0])
}

// serveProfiles serves net/http/pprof on SURGE_PPROF_ADDR when it is set
// (for profiling under load; keep it on a private address).
func serveProfiles(ctx context.Context, log *slog.Logger) error {
	var cfg struct {
		PprofAddr string `envconfig:"PPROF_ADDR"`
	}
	if err := config.Load(&cfg); err != nil {
		return err
	}
	if err := profile.Serve(ctx, cfg.PprofAddr, log); err != nil {
		return fmt.Errorf("serve profiles on %s: %w", cfg.PprofAddr, err)
	}
	return nil
}
