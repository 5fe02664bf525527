package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/app"
	"surge/pkg/reconcile"
)

// skuList is a repeatable --sku flag.
type skuList []string

func (s *skuList) String() string     { return strings.Join(*s, ",") }
func (s *skuList) Set(v string) error { *s = append(*s, v); return nil }

// once runs one reconciliation, prints its report and returns the exit
// code documented in the package comment; the report's exit_code is that
// code.
func once(ctx context.Context, cfg Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reconciler once", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var skus skuList
	fs.Var(&skus, "sku", "reconcile only this SKU (repeatable); default every product")
	dryRun := fs.Bool("dry-run", false, "report what would be repaired, change nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	detailed := fs.Bool("detailed-exitcode", false, "exit 1 when drift was repaired (with --dry-run: found); without it such a run exits 0")
	fs.Usage = func() { _ = help.Print(fs.Output()) }
	if err := fs.Parse(args); err != nil {
		return reconcile.ExitFailed
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "reconciler once: unexpected argument %q\n", fs.Arg(0))
		return reconcile.ExitFailed
	}
	var rep admin.ReconcileReport
	r, err := app.NewReconciler(ctx, cfg, log, true)
	if err != nil {
		rep = admin.ReconcileReport{StartedAt: time.Now().UTC(), DryRun: *dryRun}
		reconcile.Fail(&rep, "connect", err)
	} else {
		rep = r.Once(ctx, *dryRun, skus...)
	}
	// The report states the code the process exits with.
	rep.ExitCode = reconcile.CommandExit(rep, *detailed)
	if err := printReport(stdout, rep, *asJSON); err != nil {
		fmt.Fprintln(stderr, "reconciler once: print report:", err)
		return reconcile.ExitFailed
	}
	return rep.ExitCode
}

func printReport(w io.Writer, rep admin.ReconcileReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return reconcile.Table(w, rep)
}
