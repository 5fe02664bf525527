//go:build faults

package faults

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

const examplesPerCheck = 8

// summarize prints what the run did: answers, faults, orders, books.
func summarize(t *testing.T, h *history, e *endState, skus []string, faults []*fault, reconciles []int, took time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	answers := map[string]int{}
	for _, a := range h.attempts {
		answers[h.ops[a.Op].kind+" "+a.answer()]++
	}
	kinds := map[faultKind]int{}
	for _, f := range faults {
		kinds[f.kind]++
	}
	var with202, invoiced, unknownInvoiced, unknownLast int
	for _, o := range h.ops {
		end := e.orders[o.id]
		inv := end != nil && end.invoices > 0
		if inv {
			invoiced++
		}
		last := h.attempts[o.attempts[len(o.attempts)-1]]
		for _, ai := range o.attempts {
			if h.attempts[ai].Status == 202 {
				with202++
				break
			}
		}
		if last.outcome() == unknown {
			unknownLast++
			if inv {
				unknownInvoiced++
			}
		}
	}
	t.Logf("requests by client and answer: %s", countLine(answers))
	t.Logf("faults injected (%d): %s", len(faults), countLine(kinds))
	t.Logf("orders: %d placed in %d requests, %d answered 202, %d invoiced; %d ended on an unknown outcome, %d of them invoiced",
		len(h.ops), len(h.attempts), with202, invoiced, unknownLast, unknownInvoiced)
	for _, sku := range skus {
		s := e.skus[sku]
		t.Logf("  %s: MySQL stock %d sold %d (%d invoices); Redis stock %d avail %d reserved %d sold %d %s",
			sku, s.mysqlStock, s.mysqlSold, s.invoices, s.rStock, s.rAvail, sum(s.resv), s.rSold, s.redisErr)
	}
	dead := 0
	for _, o := range e.orders {
		if o.dead != "" {
			dead++
		}
	}
	restocks := make([]string, len(h.restocks))
	for i, r := range h.restocks {
		restocks[i] = r.String()
	}
	t.Logf("restocks: %s", strings.Join(restocks, "; "))
	for _, d := range h.deaths {
		switch {
		case d.AtStart:
			t.Logf("exit: %s at +%.1fs failed to start, started again after 1s: %s", d.Name, d.At.Seconds(), d.Exit)
		default:
			t.Logf("exit: %s at +%.1fs, asked %v: %s", d.Name, d.At.Seconds(), d.Asked, d.Exit)
		}
	}
	t.Logf("status polls: %d orders seen; failed polls: %s", len(h.polls), countLine(h.pollErrs))
	t.Logf("dead letters: %d; reconciler once exit codes: %v; run took %s end to end", dead, reconciles, took.Round(time.Second))
}

func countLine[K comparable](m map[K]int) string {
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%v=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// reportViolations fails the run with the seed and the violations per
// check, printing a few orders of each with their answers, end state and
// the faults around them. It returns the failure's one-line summary, or ""
// when the run kept the promise.
func reportViolations(t *testing.T, seed int64, c *checker, faults []*fault) string {
	if len(c.excuse) > 0 {
		t.Logf("202s compensated (%s) in a run that could lose Redis writes (check 3's exception): %d",
			compensation, len(c.excuse))
		for _, v := range c.excuse[:min(examplesPerCheck, len(c.excuse))] {
			t.Logf("  %s", c.describe(v, faults))
		}
	}
	if len(c.vs) == 0 {
		t.Logf("seed %d: no violation", seed)
		return ""
	}
	byCheck := map[string][]violation{}
	for _, v := range c.vs {
		byCheck[v.check] = append(byCheck[v.check], v)
	}
	checks := make([]string, 0, len(byCheck))
	for k := range byCheck {
		checks = append(checks, k)
	}
	sort.Strings(checks)
	var counts []string
	for _, k := range checks {
		vs := byCheck[k]
		counts = append(counts, fmt.Sprintf("check %s: %d", k, len(vs)))
		t.Logf("check %s: %d violation(s); the first %d:", k, len(vs), min(examplesPerCheck, len(vs)))
		for _, v := range vs[:min(examplesPerCheck, len(vs))] {
			t.Logf("  %s", c.describe(v, faults))
		}
	}
	verdict := fmt.Sprintf("seed %d: %d violations (%s); replay with SURGE_FAULTS_SEED=%d SURGE_FAULTS_RUNS=1",
		seed, len(c.vs), strings.Join(counts, ", "), seed)
	t.Error(verdict)
	return verdict
}

// describe spells a violation with its order's requests, answers, end
// state and the faults active from a second before its first request to
// a second after its last answer.
func (c *checker) describe(v violation, faults []*fault) string {
	if v.op < 0 {
		return fmt.Sprintf("[%s] %s: %s", v.check, v.sku, v.msg)
	}
	o := c.h.ops[v.op]
	var b strings.Builder
	id := o.id
	if id == "" {
		id = "(order id unknown)"
	}
	fmt.Fprintf(&b, "[%s] %s %s: %s\n      %s customer=%s key=%s qty=%d;", v.check, v.sku, id, v.msg,
		o.kind, o.customer, o.key, o.qty)
	var from, to time.Duration
	for k, ai := range o.attempts {
		a := c.h.attempts[ai]
		if k == 0 {
			from = a.Sent
		}
		to = a.Done
		fmt.Fprintf(&b, " +%.3fs gateway%d -> %s in %dms", a.Sent.Seconds(), a.Gateway, a.answer(),
			(a.Done - a.Sent).Milliseconds())
		if a.Err != "" {
			fmt.Fprintf(&b, " (%s)", shorten(a.Err, 80))
		}
		b.WriteString(";")
	}
	end := &orderEnd{}
	if o.id != "" {
		end = c.e.order(o.id)
	}
	fmt.Fprintf(&b, "\n      end: mysql row=%v status=%q reason=%q invoices=%d; redis state=%q reserved=%d; dead letter=%q",
		end.row, end.status, end.reason, end.invoices, end.state, end.resv, end.dead)
	var around []string
	for _, f := range faults {
		if f.start <= to+time.Second && f.end >= from-time.Second {
			around = append(around, f.String())
		}
	}
	fmt.Fprintf(&b, "\n      faults around: %s", strings.Join(around, "; "))
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
