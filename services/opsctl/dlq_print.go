package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"surge/pkg/admin"
)

func printLetters(w io.Writer, letters []admin.Letter) {
	if len(letters) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORDER\tSKU\tREASON\tATTEMPTS\tFIRST FAILURE\tLAST FAILURE")
	for _, l := range letters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", l.ID, dash(l.OrderID), dash(l.SKU), dash(l.Reason),
			l.Attempts, when(l.FirstFailure), when(l.LastFailure))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d dead letter%s, oldest first\n", len(letters), plural(len(letters)))
}

func printLetter(w io.Writer, d admin.LetterDetail) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", d.ID}, {"order", dash(d.OrderID)}, {"sku", dash(d.SKU)}, {"reason", dash(d.Reason)},
		{"attempts", fmt.Sprint(d.Attempts)}, {"first failure", when(d.FirstFailure)},
		{"last failure", when(d.LastFailure)}, {"last error", dash(d.LastError)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "headers:")
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := json.Marshal(d.Headers[k])
		if err != nil {
			v = []byte(fmt.Sprint(d.Headers[k]))
		}
		fmt.Fprintf(w, "  %s: %s\n", k, v)
	}
	if d.Body != nil {
		fmt.Fprintf(w, "body: %s\n", d.Body)
	} else {
		fmt.Fprintf(w, "body (not JSON): %q\n", d.BodyText)
	}
}

// printItems prints a replay or discard report and a one-line summary.
func printItems(w io.Writer, rep admin.LetterReport) {
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
	if len(rep.Items) == 0 {
		fmt.Fprintln(w, "no dead letters selected")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORDER\tOUTCOME\tDETAIL")
	for _, it := range rep.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, dash(it.OrderID), it.Outcome, it.Detail)
	}
	_ = tw.Flush()
	outcomes := make([]string, 0, len(rep.Counts))
	for o, n := range rep.Counts {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, n))
	}
	sort.Strings(outcomes)
	fmt.Fprintf(w, "%s by %s: %s\n", rep.Action, rep.Actor, strings.Join(outcomes, ", "))
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
