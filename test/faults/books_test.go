//go:build faults

package faults

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// stockSet is every stock a SKU may end with, by what the test loaded and
// restocked: the last restock answered 200 sets it, a refused one (409)
// changes nothing, one whose answer never came may have set it or not.
// The test sends one restock at a time, so their order is known.
func (c *checker) stockSet(sku string) []int {
	set := []int{c.ri.Loaded[sku]}
	rs := slices.Clone(c.h.restocks)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].At < rs[j].At })
	for _, r := range rs {
		switch {
		case r.SKU != sku:
		case r.Status == http.StatusOK:
			set = []int{r.Target}
		case r.Status == http.StatusConflict || r.Status == http.StatusBadRequest:
		default:
			if !slices.Contains(set, r.Target) {
				set = append(set, r.Target)
			}
		}
	}
	return set
}

// checkBooks runs checks 1 and 7 for a SKU.
func (c *checker) checkBooks(sku string) {
	s := c.e.skus[sku]
	if s == nil {
		c.add("1", sku, -1, "no end state read for the SKU")
		return
	}
	c.judged["1"]++
	set := c.stockSet(sku)
	if !slices.Contains(set, s.mysqlStock) {
		c.add("1", sku, -1, "MySQL stock %d is none the test set: loaded %d, then restocked to one of %v",
			s.mysqlStock, c.ri.Loaded[sku], set)
	}
	if s.invQty > slices.Max(set) {
		c.add("1", sku, -1, "oversold: %d units invoiced, the test set the stock to %v", s.invQty, set)
	}
	if s.mysqlSold != s.invQty {
		c.add("1", sku, -1, "products.sold %d but invoices hold %d units", s.mysqlSold, s.invQty)
	}
	c.judged["7"]++
	if s.invQty != s.mysqlStock || !slices.Contains(set, s.invQty) {
		c.add("7", sku, -1, "units left unsold after the mop-up: invoiced %d, MySQL stock %d sold %d, the test set %v; "+
			"Redis avail %d reserved %d sold %d; mop-up ended on sold out: %v", s.invQty, s.mysqlStock, s.mysqlSold, set,
			s.rAvail, sum(s.resv), s.rSold, c.ri.Mopped[sku])
	}
}

// checkRedis runs check 6 for a SKU.
func (c *checker) checkRedis(sku string) {
	s := c.e.skus[sku]
	if s == nil {
		return
	}
	c.judged["6"]++
	if s.redisErr != "" {
		c.add("6", sku, -1, "cannot read Redis: %s", s.redisErr)
		return
	}
	if s.rAvail+sum(s.resv)+s.rSold != s.rStock || s.rSold != s.mysqlSold || s.rStock != s.mysqlStock {
		c.add("6", sku, -1, "Redis avail %d + reserved %d + sold %d, stock %d; MySQL stock %d sold %d",
			s.rAvail, sum(s.resv), s.rSold, s.rStock, s.mysqlStock, s.mysqlSold)
	}
	for _, id := range sortedKeys(s.resv) {
		c.add("6", sku, c.opOf(id), "reservation of %d units left open for %s", s.resv[id], id)
	}
}

// checkSoldOutAnswers is check 7b, on every attempt answered 409
// sold_out: each is a new attempt, answered from a sighting of its own.
func (c *checker) checkSoldOutAnswers() {
	c.undos = c.undoAttempts()
	for i, o := range c.h.ops {
		for _, ai := range o.attempts {
			if a := c.h.attempts[ai]; a.Status == http.StatusConflict && a.Code == "sold_out" {
				c.judgeSoldOut(i, o, a)
			}
		}
	}
}

// judgeSoldOut judges one 409 sold_out against the samples read from
// soldOutSlack before its request was sent to one taken after its answer.
// Between two samples avail only falls (reservations) unless units come
// back, so samples that all held enough, the first read by the time the
// request was sent and the last after the answer, show that units were
// there the whole time it was being answered. A window the samples do not
// cover (a gap longer than sampleGap, or none read after the answer) is
// not judged, nor one during which another request for the SKU may have
// reserved the units and given them back (counted as 7b-unprovable).
func (c *checker) judgeSoldOut(i int, o *op, a attempt) {
	from, to := a.Sent-soldOutSlack, a.Done+sampleGap
	var in []sample
	// Samples are taken in time order, each read within a second.
	all := c.h.samples[o.sku]
	k := sort.Search(len(all), func(k int) bool { return all[k].At >= from-time.Second })
	for _, s := range all[k:] {
		if s.At > to {
			break
		}
		if s.Done >= from {
			in = append(in, s)
		}
	}
	if !covers(in, from, to) || in[len(in)-1].At < a.Done {
		return
	}
	if c.undoDuring(o.sku, from, a.Done) {
		c.judged["7b-unprovable"]++
		return
	}
	c.judged["7b"]++
	if c.duringFault(a.Sent) {
		c.judged["7b-fault"]++
	}
	for _, s := range in {
		if s.Avail < o.qty {
			return
		}
	}
	avails := make([]string, len(in))
	for k, s := range in {
		avails[k] = fmt.Sprintf("%d@+%.3fs", s.Avail, s.At.Seconds())
	}
	c.add("7b", o.sku, i, "attempt %d sent at +%.3fs answered 409 sold_out at +%.3fs while Redis held at least %d units in all "+
		"%d samples from %s before it was sent to after it: %s", a.N+1, a.Sent.Seconds(), a.Done.Seconds(), o.qty, len(in),
		soldOutSlack, strings.Join(avails, " "))
}

// undoAttempts are, per SKU, the attempts that may have reserved units
// and given them back (answered 503 unavailable or outcome_unknown, 5xx,
// or no answer): while one is in flight, avail can fall to 0 and come back
// between two samples, and a 409 then is true.
func (c *checker) undoAttempts() map[string][]attempt {
	m := map[string][]attempt{}
	for _, a := range c.h.attempts {
		if a.Status == 0 || a.Status >= 500 {
			sku := c.h.ops[a.Op].sku
			m[sku] = append(m[sku], a)
		}
	}
	return m
}

// undoDuring tells whether such an attempt on sku was in flight in
// [from, to].
func (c *checker) undoDuring(sku string, from, to time.Duration) bool {
	for _, a := range c.undos[sku] {
		if a.Done >= from && a.Sent <= to {
			return true
		}
	}
	return false
}

// covers tells whether samples (in time order) leave no gap longer than
// sampleGap in [from, to].
func covers(in []sample, from, to time.Duration) bool {
	if len(in) < 2 {
		return false
	}
	sort.Slice(in, func(i, j int) bool { return in[i].At < in[j].At })
	at := from
	for _, s := range in {
		if s.At-at > sampleGap {
			return false
		}
		at = max(at, s.Done)
	}
	return to-at <= sampleGap
}

// checkRun is check F: the run tested what it says.
func (c *checker) checkRun() {
	for _, f := range c.ri.Faults {
		c.judged["F"]++
		switch {
		case f.Err != "":
			c.add("F", "", -1, "fault %s %s was not dealt cleanly: %s", f.Kind, f.Target, f.Err)
		case f.Effect == "":
			c.add("F", "", -1, "fault %s %s showed no effect", f.Kind, f.Target)
		}
	}
	for _, d := range c.h.deaths {
		if !d.Asked && !d.AtStart {
			c.add("F", "", -1, "%s died unasked at +%.1fs (%s)", d.Name, d.At.Seconds(), d.Exit)
		}
	}
	for _, k := range c.ri.Deck {
		if !slices.ContainsFunc(c.ri.Faults, func(f faultRecord) bool { return f.Kind == k }) {
			c.add("F", "", -1, "the deck's %s was never dealt", k)
		}
	}
	for i, code := range c.ri.Reconciles {
		if code != 0 {
			c.add("F", "", -1, "reconciler once (run %d of %d) exited %d: it failed or stayed busy", i+1, len(c.ri.Reconciles), code)
		}
	}
	if len(c.ri.Faults) == 0 {
		return
	}
	sent, ok := 0, 0
	for _, a := range c.h.attempts {
		if !c.duringFault(a.Sent) {
			continue
		}
		sent++
		if a.Status == http.StatusAccepted {
			ok++
		}
	}
	if sent == 0 || ok == 0 {
		c.add("F", "", -1, "while faults were active (each to %s after its end) %d orders were sent and %d answered 202: "+
			"the faults met no sale", faultAftermath, sent, ok)
	}
}

// duringFault tells whether t falls in a fault's window.
func (c *checker) duringFault(t time.Duration) bool {
	for _, f := range c.ri.Faults {
		if t >= f.Start && t <= f.End+faultAftermath {
			return true
		}
	}
	return false
}
