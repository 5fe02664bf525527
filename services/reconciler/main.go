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
//	reconciler --help   the usage and every SURGE_ variable it reads
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

	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/reconcile"
	"surge/pkg/version"
)

// Config is the reconciler's configuration (see the package comment).
type Config = app.ReconcilerConfig

// help is what reconciler --help prints; other arguments exit 2.
var help = app.Usage{
	Synopsis: synopsis,
	Details:  onceUsage,
	Commands: map[string]bool{"serve": false, "once": true},
	Config:   &Config{},
}

func main() { app.MainCode("reconciler", help, run) }

// run executes one command and returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if version.IsFlag(args) {
		_ = version.Print(stdout, "reconciler")
		return 0
	}
	if wantsHelp(args) {
		if err := help.Print(stdout); err != nil {
			fmt.Fprintln(stderr, "reconciler:", err)
			return reconcile.ExitFailed
		}
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
	fmt.Fprintf(stderr, "reconciler: unknown command %q (want serve or once); reconciler --help shows the usage\n", args[0])
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

const synopsis = `  reconciler [serve]        reconcile every SKU on a schedule (SURGE_RECONCILE_EVERY)
  reconciler once [FLAGS]   one run, for cron jobs, with a report on stdout
  reconciler --version      print the version, VCS revision and Go version
  reconciler --help         print this
`

const onceUsage = `flags of once:
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

// serve runs the schedule until ctx ends (see app.Reconciler.Serve).
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := app.ServeProfiles(ctx, log); err != nil {
		return err
	}
	r, err := app.NewReconciler(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	return r.Serve(ctx)
}
