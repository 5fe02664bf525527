// Command gateway serves surge's HTTP API: it reserves stock in Redis
// Cluster and publishes accepted orders to RabbitMQ.
//
//	gateway           serve the public API on SURGE_HTTP_ADDR (default
//	                  127.0.0.1:8080), the admin API, /metrics and the
//	                  console on SURGE_ADMIN_ADDR (default 127.0.0.1:8081)
//	gateway migrate   apply the MySQL migrations and exit
//	gateway --version print the version, VCS revision and Go version
//	gateway --help    print the usage and every SURGE_ variable it reads
//
// Configuration comes from SURGE_ variables (see README). SIGINT or
// SIGTERM stops intake, finishes in-flight requests, then closes clients.
package main

import (
	"context"
	"fmt"
	"os"

	"surge/pkg/app"
	"surge/pkg/config"
)

// usage is what gateway --help prints; other arguments exit 2.
var usage = app.Usage{
	Synopsis: `  gateway [serve]    serve the public API on SURGE_HTTP_ADDR, the admin API, /metrics
                     and the console on SURGE_ADMIN_ADDR
  gateway migrate    apply the MySQL migrations and exit
  gateway --version  print the version, VCS revision and Go version
  gateway --help     print this
`,
	Commands: map[string]bool{"serve": false, "migrate": false},
	Config:   &app.GatewayConfig{},
}

func main() { app.Main("gateway", usage, run) }

func run(ctx context.Context, args []string) error {
	var cfg app.GatewayConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	log := app.NewLogger(cfg.LogLevel, "gateway")
	switch {
	case len(args) == 0 || args[0] == "serve":
		if err := app.ServeProfiles(ctx, log); err != nil {
			return err
		}
		g, err := app.NewGateway(ctx, cfg, log)
		if err != nil {
			return err
		}
		return g.Run(ctx)
	case args[0] == "migrate":
		return app.Migrate(ctx, cfg.MySQL.DSN, os.Stdout)
	}
	return fmt.Errorf("unknown command %q (want serve or migrate)", args[0])
}
