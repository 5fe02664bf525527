package reconcile

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"surge/pkg/admin"
)

// Table writes r for a person: one line per SKU with what Redis
// holds after the run, what MySQL sold and what was repaired (or the
// error), then run-level errors and a summary ending with the exit code.
func Table(w io.Writer, r admin.ReconcileReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tOUTCOME\tREDIS STOCK/AVAIL/RESERVED/SOLD\tMYSQL SOLD\tDETAIL")
	for _, s := range r.SKUs {
		counts, mysql := "-", "-"
		if a := s.After; a != nil {
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
	steps := make([]string, 0, len(r.Errors))
	for what := range r.Errors {
		steps = append(steps, what)
	}
	sort.Strings(steps)
	for _, what := range steps {
		fmt.Fprintf(w, "error: %s: %s\n", what, r.Errors[what])
	}
	verb := "repaired"
	if r.DryRun {
		verb = "to repair (dry run)"
	}
	_, err := fmt.Fprintf(w, "%d consistent, %d %s, %d busy, %d failed; exit %d\n",
		r.Summary[admin.SKUConsistent], r.Summary[admin.SKURepaired], verb, r.Summary[admin.SKUBusy], r.Summary[admin.SKUFailed], r.ExitCode)
	return err
}

// detail sums up one SKU's repairs, or its error.
func detail(s admin.SKUReport) string {
	if s.Error != "" {
		return s.Error
	}
	compensated := ""
	if s.Found != nil && s.Found.Compensated > 0 {
		compensated = fmt.Sprintf("; %d accepted orders rejected (sold_out_after_acceptance)", s.Found.Compensated)
	}
	if len(s.Repairs) == 0 {
		return strings.TrimPrefix(compensated, "; ")
	}
	var committed, released, republished, unpublished int
	for _, r := range s.Repairs {
		committed += len(r.Committed)
		released += len(r.Released)
		republished += len(r.Republished)
		unpublished += len(r.Unpublished)
	}
	d := fmt.Sprintf("committed %d, released %d", committed, released)
	if republished > 0 {
		d += fmt.Sprintf(", published again %d", republished)
	}
	if unpublished > 0 {
		d += fmt.Sprintf(", %d past grace not published (no broker?)", unpublished)
	}
	return d + compensated
}
