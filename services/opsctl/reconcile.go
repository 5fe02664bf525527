package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"surge/pkg/admin"
	"surge/pkg/config"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/reconcile"
)

// reconcileUsage documents the command and its exit codes. Codes 0-3 are
// those of `reconciler once`, so a cron job may call either; they differ
// from opsctl's usual meaning of 1 (failed).
const reconcileUsage = `opsctl reconcile [--sku S]... [--dry-run] [--json] [--detailed-exitcode]
Compare each SKU's stock in Redis with MySQL (the truth) and repair Redis, as
reconciler once does.
flags:
  --sku S               reconcile this SKU (repeatable); default every product
  --dry-run             report what would be repaired, change nothing in Redis
                        (what it found is still logged in MySQL's reconcile_repairs)
  --json                print the report as JSON
  --detailed-exitcode   exit 1 when drift was repaired (with --dry-run: found)
Settings: SURGE_RECONCILE_GRACE (5m), SURGE_RECONCILE_LOOKBACK (15m).
exit codes (those of reconciler once, plus 4; the report's exit_code says the same):
  0  every SKU was consistent, or was repaired (without --detailed-exitcode)
  1  with --detailed-exitcode: repairs were applied (with --dry-run: are needed)
  2  a usage mistake or an invalid SKU, or a SKU or the run failed: see the report
  3  run again later: a SKU was busy (another run held it, or live traffic moved
     it), or Redis or MySQL was unreachable
  4  a SKU is unknown to MySQL; nothing was reconciled`

func (c *cli) reconcileCmd() *cobra.Command {
	var req admin.ReconcileRequest
	var detailed bool
	cmd := &cobra.Command{
		Use: "reconcile [--sku S]... [--dry-run] [--json] [--detailed-exitcode]",
		Short: "repair Redis from MySQL: reconcile [--sku S]... [--dry-run] [--json] [--detailed-exitcode]; " +
			"exit 0 consistent or repaired, 1 repaired (--detailed-exitcode), 2 failed, 3 busy or unreachable, 4 unknown SKU",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("reconcile: unexpected argument %q (name SKUs with --sku)", args[0])
			}
			return nil
		},
		RunE: action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			return c.reconcile(ctx, req, c.json, detailed)
		}),
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&req.SKUs, "sku", nil, "reconcile this SKU (repeatable); default every product")
	fs.BoolVar(&req.DryRun, "dry-run", false, "report what would be repaired, change nothing")
	fs.BoolVar(&detailed, "detailed-exitcode", false, "exit 1 when drift was repaired")
	return withUsage(cmd, reconcileUsage)
}

func (c *cli) reconcile(ctx context.Context, req admin.ReconcileRequest, asJSON, detailed bool) error {
	if err := req.Validate(); err != nil {
		return err
	}
	e, err := c.env()
	if err != nil {
		return err
	}
	// The repairs are recorded under the operator, as dead-letter actions
	// are; one who cannot be named runs as the schedule would.
	req.Actor, _ = operator()
	svc, err := reconciler(ctx, e)
	if err != nil {
		return notRun(err)
	}
	rep, err := svc.Run(ctx, req)
	if rep.StartedAt.IsZero() {
		return notRun(err)
	}
	// The report states the code the process exits with.
	rep.ExitCode = reconcile.CommandExit(rep, detailed)
	if asJSON {
		// A run that failed or found SKUs busy carries it under "error".
		if err = e.printJSONResult(rep, runFailure(rep)); errors.As(err, new(reportedError)) {
			return err
		}
	} else {
		err = reconcile.Table(e.out, rep)
	}
	if err != nil {
		return exitError{reconcile.ExitFailed, fmt.Errorf("print report: %w", err)}
	}
	if rep.ExitCode != reconcile.ExitConsistent {
		return exitError{code: rep.ExitCode}
	}
	return nil
}

// reconciler opens Redis and MySQL and builds the reconciler with the
// settings the reconciler service reads.
func reconciler(ctx context.Context, e *env) (*ops.Reconcile, error) {
	var rc config.Reconcile
	if err := config.Load(&rc); err != nil {
		return nil, usagef("%v", err)
	}
	rdb, err := e.Redis(ctx)
	if err != nil {
		return nil, err
	}
	db, err := e.DB(ctx)
	if err != nil {
		return nil, err
	}
	opts := reconcile.Options{
		Grace: rc.Grace, Lookback: rc.Lookback, StateTTL: e.cfg.IdempotencyTTL,
		// Everything worth saying is in the report.
		Log: slog.New(slog.DiscardHandler),
	}
	// Without the broker the run still repairs; the orders it would
	// publish again are reported as held.
	if mq, err := e.AMQP(ctx); err == nil {
		pub, err := queue.NewPublisher(mq, e.cfg.AMQP.Topology(), queue.PublisherOptions{Channels: 1})
		if err != nil {
			return nil, err
		}
		opts.Publisher = pub
	}
	rec := reconcile.New(rdb.ClusterClient, reconcile.StoreLedger{Store: db}, opts)
	return &ops.Reconcile{Rec: rec, DB: db}, nil
}

// runFailure is the failure a finished run's exit code reports, nil for
// a consistent or repaired run.
func runFailure(rep admin.ReconcileReport) error {
	if rep.ExitCode != reconcile.ExitFailed && rep.ExitCode != reconcile.ExitBusy {
		return nil
	}
	return exitError{rep.ExitCode, fmt.Errorf("reconcile: %d SKU(s) failed, %d busy, %d run error(s): see the report",
		rep.Summary[admin.SKUFailed], rep.Summary[admin.SKUBusy], len(rep.Errors))}
}

// notRun maps an error that kept the run from starting to its exit code.
// Usage mistakes keep opsctl's code 2, which is also reconcile's "failed".
func notRun(err error) error {
	var ue usageError
	switch {
	case errors.As(err, &ue), errors.Is(err, order.ErrInvalid):
		return err
	case errors.Is(err, order.ErrUnknownSKU):
		return exitError{exitNotFound, err}
	case errors.Is(err, order.ErrUnavailable):
		return exitError{exitUnavailable, err}
	}
	return exitError{reconcile.ExitFailed, err}
}
