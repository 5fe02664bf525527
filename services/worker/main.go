// Command worker consumes accepted orders and writes order + invoice to
// MySQL exactly once per order, then settles the reservation in Redis.
//
//	worker           consume SURGE_AMQP_QUEUE (default orders.created)
//	worker migrate   apply the MySQL migrations and exit
//	worker --version print the version, VCS revision and Go version
//	worker --help    print the usage and every SURGE_ variable it reads
//
// SIGINT or SIGTERM stops intake, finishes in-flight orders (each acked
// after its commit), then closes clients.
package main

import (
	"context"
	"fmt"
	"os"

	"surge/pkg/app"
	"surge/pkg/config"
)

// usage is what worker --help prints; other arguments exit 2.
var usage = app.Usage{
	Synopsis: `  worker [run]      consume SURGE_AMQP_QUEUE and invoice each order in MySQL
  worker migrate    apply the MySQL migrations and exit
  worker --version  print the version, VCS revision and Go version
  worker --help     print this
`,
	Commands: map[string]bool{"run": false, "migrate": false},
	Config:   &app.WorkerConfig{},
}

func main() { app.Main("worker", usage, run) }

func run(ctx context.Context, args []string) error {
	var cfg app.WorkerConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	log := app.NewLogger(cfg.LogLevel, "worker")
	switch {
	case len(args) == 0 || args[0] == "run":
		if err := app.ServeProfiles(ctx, log); err != nil {
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
