// Command gateway serves surge's HTTP API: it reserves stock in Redis
// Cluster and publishes accepted orders to RabbitMQ.
//
//	gateway           serve on SURGE_HTTP_ADDR (default 127.0.0.1:8080)
//	gateway migrate   apply the MySQL migrations and exit
//
// Configuration comes from SURGE_ variables (see README). SIGINT or
// SIGTERM stops intake, finishes in-flight requests, then closes clients.
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
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var cfg app.GatewayConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	log := app.NewLogger(cfg.LogLevel, "gateway")
	switch {
	case len(args) == 0 || args[0] == "serve":
		if err := serveProfiles(ctx, log); err != nil {
			return err
		}
		g, err := app.NewGateway(ctx, cfg, log)
		if err != nil {
			return err
		}
		return g.Run(ctx, nil)
	case args[0] == "migrate":
		return app.Migrate(ctx, cfg.MySQL.DSN, os.Stdout)
	}
	return fmt.Errorf("unknown command %q (want serve or migrate)", args[0])
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
