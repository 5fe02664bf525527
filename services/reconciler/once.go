package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"surge/pkg/reconcile"
)

// skuList is a repeatable --sku flag.
type skuList []string

func (s *skuList) String() string     { return strings.Join(*s, ",") }
func (s *skuList) Set(v string) error { *s = append(*s, v); return nil }

// once runs one reconciliation, prints its report and returns the exit
// code documented in the package comment.
func once(ctx context.Context, cfg Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reconciler once", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var skus skuList
	fs.Var(&skus, "sku", "reconcile only this SKU (repeatable); default every product")
	dryRun := fs.Bool("dry-run", false, "report what would be repaired, change nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return reconcile.ExitFailed
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "reconciler once: unexpected argument %q\n", fs.Arg(0))
		return reconcile.ExitFailed
	}
	var rep reconcile.Report
	d, err := open(ctx, cfg, log)
	if err != nil {
		rep = reconcile.Report{StartedAt: time.Now().UTC(), DryRun: *dryRun}
		rep.Fail("connect", err)
	} else {
		rep = d.rec.Run(ctx, *dryRun, skus...)
		d.close()
	}
	if err := printReport(stdout, rep, *asJSON); err != nil {
		fmt.Fprintln(stderr, "reconciler once: print report:", err)
		return reconcile.ExitFailed
	}
	return rep.ExitCode
}

func printReport(w io.Writer, rep reconcile.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tOUTCOME\tREDIS STOCK/AVAIL/RESERVED/SOLD\tMYSQL SOLD\tDETAIL")
	for _, s := range rep.SKUs {
		counts, mysql := "-", "-"
		if s.After != nil {
			a := s.After
			counts = fmt.Sprintf("%d/%d/%d/%d", a.Stock, a.Avail, a.Reserved, a.Sold)
		}
		if s.Found != nil {
			mysql = fmt.Sprint(s.Found.MySQLSold)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.SKU, s.Outcome, counts, mysql, detail(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for what, msg := range rep.Errors {
		fmt.Fprintf(w, "error: %s: %s\n", what, msg)
	}
	verb := "repaired"
	if rep.DryRun {
		verb = "to repair (dry run)"
	}
	_, err := fmt.Fprintf(w, "%d consistent, %d %s, %d busy, %d failed; exit %d\n",
		rep.Summary[reconcile.Consistent], rep.Summary[reconcile.Repaired], verb,
		rep.Summary[reconcile.Busy], rep.Summary[reconcile.Failed], rep.ExitCode)
	return err
}

// detail sums up one SKU's repairs, or its error.
func detail(s reconcile.SKUReport) string {
	if s.Error != "" {
		return s.Error
	}
	var committed, released int
	for _, r := range s.Repairs {
		committed += len(r.Committed)
		released += len(r.Released)
	}
	if len(s.Repairs) == 0 {
		return ""
	}
	return fmt.Sprintf("committed %d, released %d", committed, released)
}
