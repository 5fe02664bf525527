package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"surge/pkg/config"
	"surge/pkg/profile"
	"surge/pkg/version"
)

// Main runs a service's command line: run gets a context cancelled by
// SIGINT or SIGTERM (the start of the service's documented shutdown) and
// the arguments; an error goes to stderr with the service's name and the
// process exits 1. --version prints the build (pkg/version) and --help
// the usage with every SURGE_ variable (u), both exit 0 without reading
// any configuration; a command line u does not allow exits 2. It sets the
// services' garbage-collector defaults first (gc.go).
func Main(name string, u Usage, run func(ctx context.Context, args []string) error) {
	MainCode(name, u, func(ctx context.Context, args []string, _, stderr io.Writer) int {
		if err := run(ctx, args); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	})
}

// MainCode is Main for a command whose exit codes say more than failed or
// not (reconciler once): run prints what it has to say and returns the
// process's exit code.
func MainCode(name string, u Usage, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	if version.IsFlag(os.Args[1:]) {
		_ = version.Print(os.Stdout, name)
		return
	}
	if code, ok := u.parseArgs(name, os.Args[1:], os.Stdout, os.Stderr); !ok {
		os.Exit(code)
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// profileConfig is ServeProfiles' setting, which every service reads.
type profileConfig struct {
	PprofAddr string `envconfig:"PPROF_ADDR"`
}

// ServeProfiles serves net/http/pprof on SURGE_PPROF_ADDR when it is set
// (for profiling under load; keep it on a private address).
func ServeProfiles(ctx context.Context, log *slog.Logger) error {
	var cfg profileConfig
	if err := config.Load(&cfg); err != nil {
		return err
	}
	if err := profile.Serve(ctx, cfg.PprofAddr, log); err != nil {
		return fmt.Errorf("serve profiles on %s: %w", cfg.PprofAddr, err)
	}
	return nil
}
