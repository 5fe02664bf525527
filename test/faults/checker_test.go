//go:build faults

package faults

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// The checks, as numbered in the reports, each judging the README's words
// (What each answer promises):
//
//	1 never oversell: per SKU, MySQL's stock is one the test set (loaded, or restocked: the last
//	  restock answered 200, or one whose answer never came), invoiced units <= that stock and
//	  products.sold == invoiced units
//	2 at most one invoice per order id, matching its orders row and the order's body, for orders
//	  the clients placed; one Idempotency-Key names one order
//	3 every order answered 202 ends invoiced; the one exception is the compensation (rejected,
//	  reason sold_out_after_acceptance, or purchase_limit_after_acceptance on a SKU with a limit)
//	  of an order answered 202 after a fault that could lose Redis writes (a master killed or
//	  paused past the node timeout) struck its SKU's master, counted apart, and no more units of
//	  a SKU than that fault could have lost (those answered in the 2 s before it, or after a
//	  paused master resumed)
//	4 an order answered "not taken" (any 4xx: 400, 404, 409, 413, 422, 429; 503 unavailable) is never
//	  invoiced, never parked in the dead letters, and holds no reservation at the end
//	5 same-key retries agree: an unknown outcome (503 outcome_unknown, a transport error) ends
//	  settled (invoiced or rejected, or absent with no reservation left); a later "not taken" to
//	  a retry is true of the end state, but a 409 sold_out, which takes nothing and leaves the
//	  key free: an earlier attempt still on its way may have taken units that came back, so
//	  the order is then judged as unknown; no retry of an order answered 202 is answered "not
//	  taken"
//	6 after reconcile, per SKU in Redis: avail + reserved + sold == stock, sold and stock equal
//	  MySQL's, no reservation left open
//	7 stock not lost: after the sale, a reconcile and a mop-up that bought until sold out, every
//	  unit is sold (MySQL sold == stock)
//	7b every 409 sold_out (every attempt: a retry is a new attempt) comes from a sighting made
//	  while it was being answered: Redis's avail, sampled every 50 ms, was short of the order's
//	  quantity at least once from one sample gap (100 ms) before the request was sent to a
//	  sample after its answer (judged only where the samples cover that window and no other
//	  request for the SKU that may have reserved and undone, a 503 or no answer, was in flight
//	  in it)
//	L a purchase limit holds: per SKU with one, no customer has more units invoiced than the
//	  loosest limit that may have been in force while one of its invoiced orders was placed (from
//	  its first request to its last answer; the test lowers and raises the limit mid-sale, and a
//	  load left without an answer may or may not have taken); the hammer is one customer on such
//	  a SKU; a 202 rejected for the limit by MySQL (purchase_limit_after_acceptance) is the
//	  compensation's twin, excused in the same runs
//	8 a status poll that saw an order invoiced or rejected agrees with its end state
//	F the run tested something: every fault was dealt without error and took effect, no program
//	  died unasked, orders were placed and answered 202 while faults were active, and every
//	  `reconciler once` exited 0 (not failed, not busy)
//
// Each check counts the samples it judged; a check with fewer than its
// minimum fails the run (check "min"), since it then proved nothing.
const (
	sampleGap      = 100 * time.Millisecond // the longest gap between samples a judged window may have
	soldOutSlack   = sampleGap              // a 409's window opens this long before its request was sent
	compensation   = "sold_out_after_acceptance"
	limitGuarded   = "purchase_limit_after_acceptance"
	faultAftermath = 2 * time.Second // a fault's window runs on this long after its end
)

// checkMinimums are the fewest samples per check for a run to mean
// something.
func checkMinimums() map[string]int {
	return map[string]int{"1": nSKUs, "2": 50, "3": 20, "4": 20, "5": 1, "6": nSKUs, "7": nSKUs, "7b": 10, "8": 1, "F": 1, "L": 1}
}

type violation struct {
	check string
	sku   string
	op    int // -1: not about one order
	msg   string
}

type checker struct {
	h      *history
	e      *endState
	ri     *runInfo
	skus   []string
	vs     []violation
	excuse []violation // 202s compensated, the documented exception
	judged map[string]int
	undos  map[string][]attempt // per SKU, attempts that may have reserved and undone (check 7b)
}

func (c *checker) add(check, sku string, op int, format string, args ...any) {
	c.vs = append(c.vs, violation{check: check, sku: sku, op: op, msg: fmt.Sprintf(format, args...)})
}

func runChecks(h *history, e *endState, ri *runInfo) *checker {
	c := &checker{h: h, e: e, ri: ri, skus: ri.SKUs, judged: map[string]int{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, sku := range c.skus {
		c.checkBooks(sku)
		c.checkRedis(sku)
	}
	for i, o := range h.ops {
		c.checkOrder(i, o)
	}
	c.checkCompensations()
	c.checkUnclaimed()
	c.checkLimits()
	c.checkSoldOutAnswers()
	c.checkPolls()
	c.checkRun()
	c.checkMinimums()
	return c
}

// checkMinimums adds a violation for each check that judged fewer
// samples than its minimum.
func (c *checker) checkMinimums() {
	min := c.ri.Min
	if min == nil {
		min = checkMinimums()
		// A memory alarm blocks publishers: the orders it meets are
		// answered 503 unavailable (their reservation undone). A crowd
		// on a sold-out SKU is answered 409 while the fault lasts.
		if c.dealt(memAlarm) {
			min["4u"] = 1
		}
		if c.dealt(crowdSoldOut) {
			min["7b-fault"] = 1
		}
	}
	for _, k := range sortedKeys(min) {
		if c.judged[k] < min[k] {
			c.add("min", "", -1, "check %s judged %d samples, fewer than the %d it needs to mean something", k, c.judged[k], min[k])
		}
	}
}

// dealt tells whether the run dealt a fault of kind k without error.
func (c *checker) dealt(k faultKind) bool {
	for _, f := range c.ri.Faults {
		if f.Kind == k && f.Err == "" {
			return true
		}
	}
	return false
}

// judgedLine spells how many samples each check judged.
func (c *checker) judgedLine() string {
	return countLine(c.judged)
}

func (c *checker) opOf(id string) int {
	for i, o := range c.h.ops {
		if o.id == id {
			return i
		}
	}
	return -1
}

// checkOrder runs checks 2 to 5 for one order.
func (c *checker) checkOrder(i int, o *op) {
	end := &orderEnd{} // no id: no trace of it anywhere, not in MySQL, parked or reserved
	if o.id != "" {
		end = c.e.order(o.id)
	}
	invoiced := end.invoiced()
	if o.id != "" {
		c.judged["2"]++
	}
	if end.invoices > 1 {
		c.add("2", o.sku, i, "%d invoices", end.invoices)
	}
	if invoiced && (end.invoices == 0 || end.status != "invoiced" || end.invQty != o.qty || end.sku != o.sku) {
		c.add("2", o.sku, i, "invoice and order row disagree with each other or with the order placed")
	}
	if len(o.otherIDs) > 0 {
		c.add("2", o.sku, i, "one Idempotency-Key, several orders: %s and %s", o.id, strings.Join(o.otherIDs, ", "))
	}
	c.checkRetries(i, o, end, invoiced)
	if c.accepted(o) {
		c.judged["3"]++
		if !invoiced {
			c.checkAccepted(i, o, end)
		}
		return
	}
	last := c.h.attempts[o.attempts[len(o.attempts)-1]]
	outcome := last.outcome()
	if last.Status == http.StatusConflict && last.Code == "sold_out" && c.unknownBefore(o) {
		// README: a 409 sold_out takes nothing and leaves the key free; the
		// earlier attempt whose outcome is unknown may have taken units.
		outcome = unknown
	}
	switch outcome {
	case refused:
		c.checkRefused(i, o, end, invoiced, last)
	case unknown:
		if !end.row && end.resv > 0 {
			c.add("5", o.sku, i, "outcome unknown (%s) and never settled: no MySQL order, %d units still reserved",
				last.answer(), end.resv)
		}
	}
}

// accepted tells whether any attempt of o was answered 202.
func (c *checker) accepted(o *op) bool {
	for _, ai := range o.attempts {
		if c.h.attempts[ai].Status == http.StatusAccepted {
			return true
		}
	}
	return false
}

// checkRetries is check 5's agreement between the attempts of one key:
// counted for every op retried or left unknown.
func (c *checker) checkRetries(i int, o *op, end *orderEnd, invoiced bool) {
	var sawUnknown, sawAccepted bool
	for k, ai := range o.attempts {
		a := c.h.attempts[ai]
		switch a.outcome() {
		case unknown:
			sawUnknown = true
		case accepted:
			sawAccepted = true
		case refused:
			if sawAccepted {
				c.add("5", o.sku, i, "attempt %d answered %s after an earlier attempt with the same key was answered 202",
					k+1, a.answer())
			}
		}
	}
	if len(o.attempts) > 1 || sawUnknown {
		c.judged["5"]++
	}
}

// checkRefused is check 4 (and 5 after an unknown outcome): an order
// answered "not taken" at last is not invoiced, not parked, not held.
func (c *checker) checkRefused(i int, o *op, end *orderEnd, invoiced bool, last attempt) {
	c.judged["4"]++
	if last.Status == http.StatusServiceUnavailable {
		c.judged["4u"]++ // 503 unavailable: the gateway's own "not taken" after a failure
	}
	check, what := "4", fmt.Sprintf("answered %s (not taken)", last.answer())
	if c.unknownBefore(o) {
		check, what = "5", fmt.Sprintf("a retry with the same key was answered %s (not taken)", last.answer())
	}
	if invoiced {
		c.add(check, o.sku, i, "%s, yet invoiced", what)
	}
	if end.dead != "" {
		c.add(check, o.sku, i, "%s, yet parked in the dead letters (%s): one replay from an invoice", what, end.dead)
	}
	if end.resv > 0 {
		c.add(check, o.sku, i, "%s, yet %d units are still reserved for it at the end", what, end.resv)
	}
}

// unknownBefore tells whether an attempt of o before its last had an
// unknown outcome.
func (c *checker) unknownBefore(o *op) bool {
	for _, ai := range o.attempts[:len(o.attempts)-1] {
		if c.h.attempts[ai].outcome() == unknown {
			return true
		}
	}
	return false
}

// checkUnclaimed looks at the orders in MySQL, the dead letters or Redis's
// reservations that no op claims. One whose customer placed nothing is a
// phantom (check 2). A hammering customer (the hammer, a burst, the
// crowd's) has many orders and the test cannot name the order of a
// request no answer named: per such customer, its unclaimed orders that
// were invoiced, parked or held may not outnumber its requests of unknown
// outcome (check 4).
func (c *checker) checkUnclaimed() {
	claimed, customers := map[string]bool{}, map[string]bool{}
	unknowns, unnamed := map[string]int{}, map[string][]int{}
	for i, o := range c.h.ops {
		claimed[o.id], customers[o.customer] = true, true
		for _, id := range o.otherIDs {
			claimed[id] = true
		}
		if o.kind != "hammer" || o.id != "" {
			continue
		}
		unnamed[o.customer] = append(unnamed[o.customer], i)
		if c.h.attempts[o.attempts[len(o.attempts)-1]].outcome() == unknown {
			unknowns[o.customer]++
		}
	}
	unclaimed := map[string][]string{}
	for _, id := range sortedKeys(c.e.orders) {
		o := c.e.orders[id]
		switch {
		case claimed[id] || !o.row && o.invoices == 0 && o.dead == "" && o.resv == 0:
		case !customers[o.customer]:
			c.add("2", o.sku, -1, "order %s of customer %q (%s, %d invoices, dead letter %q, %d reserved) but no client placed it",
				id, o.customer, o.status, o.invoices, o.dead, o.resv)
		case unnamed[o.customer] != nil && (o.invoices > 0 || o.dead != "" || o.resv > 0):
			unclaimed[o.customer] = append(unclaimed[o.customer], id)
		}
	}
	for _, cust := range sortedKeys(unclaimed) {
		ids := unclaimed[cust]
		if len(ids) > unknowns[cust] {
			sku := c.h.ops[unnamed[cust][0]].sku
			c.add("4", sku, -1, "hammering customer %s has %d orders no answer named that were invoiced, parked or "+
				"held, but only %d of its requests had an unknown outcome: the others were answered not taken (%s); orders: %s",
				cust, len(ids), unknowns[cust], c.refusedAnswers(unnamed[cust]), strings.Join(ids, " "))
		}
	}
}

// refusedAnswers counts the last answers of ops, by answer.
func (c *checker) refusedAnswers(ops []int) string {
	n := map[string]int{}
	for _, i := range ops {
		o := c.h.ops[i]
		n[c.h.attempts[o.attempts[len(o.attempts)-1]].answer()]++
	}
	return countLine(n)
}

// checkAccepted judges a 202 that was not invoiced: only the
// compensation of an order whose SKU's master a fault that can lose Redis
// writes struck before the order's 202 is excused (checkCompensations
// caps those per SKU by what the faults could have lost).
func (c *checker) checkAccepted(i int, o *op, end *orderEnd) {
	if end.status == "rejected" && (end.reason == compensation || end.reason == limitGuarded && c.ri.Limits[o.sku] > 0) {
		if f := c.lossBefore(o); f != nil {
			c.excuse = append(c.excuse, violation{check: "3", sku: o.sku, op: i,
				msg: fmt.Sprintf("rejected: %s, after %s struck its master at +%.1fs", end.reason, f.Kind, f.Start.Seconds())})
			return
		}
		c.add("3", o.sku, i, "answered 202, then compensated (%s), with no fault that could lose its SKU's Redis writes "+
			"struck before", end.reason)
		return
	}
	c.add("3", o.sku, i, "answered 202 but not invoiced (status %q reason %q, dead letter %q)", end.status, end.reason, end.dead)
}

// lossBefore is the first fault that could lose Redis writes of o's SKU
// (its master struck) and struck before o's 202 was answered: a
// compensation of o is explained by it. Nil when none.
func (c *checker) lossBefore(o *op) *faultRecord {
	var answered time.Duration
	for _, ai := range o.attempts {
		if a := c.h.attempts[ai]; a.Status == http.StatusAccepted {
			answered = a.Done
			break
		}
	}
	for k := range c.ri.Faults {
		f := &c.ri.Faults[k]
		if f.Kind.losesRedisWrites() && slices.Contains(f.SKUs, o.sku) && f.Start <= answered {
			return f
		}
	}
	return nil
}

// lossWindow is how long before a master was struck its writes may not
// have reached its replica (and, for a paused master, how long after it
// resumed it may have acknowledged writes it then lost): replication lags
// by less, and everything older was replicated.
const lossWindow = 2 * time.Second

// lostWindows are the spans in which the answers to orders of a struck
// master's SKUs may rest on writes the failover lost: before the strike,
// and, for a pause, after the resume (the node answers what it queued,
// then learns it was replaced).
func lostWindows(f faultRecord) [][2]time.Duration {
	w := [][2]time.Duration{{f.Start - lossWindow, f.Start}}
	if f.Kind == pauseRedis {
		w = append(w, [2]time.Duration{f.End, f.End + lossWindow})
	}
	return w
}

// checkCompensations caps the excused compensations of each SKU by what
// the faults that struck its master could have lost: the units of its
// orders answered 202 or left unknown in the faults' lostWindows.
// Excused units beyond that are check 3's.
func (c *checker) checkCompensations() {
	excused := map[string]int{}
	for _, v := range c.excuse {
		excused[v.sku] += c.h.ops[v.op].qty
	}
	for _, sku := range sortedKeys(excused) {
		lost := 0
		for _, f := range c.ri.Faults {
			if !f.Kind.losesRedisWrites() || !slices.Contains(f.SKUs, sku) {
				continue
			}
			for _, w := range lostWindows(f) {
				for _, a := range c.h.attempts {
					if o := c.h.ops[a.Op]; o.sku == sku && a.outcome() != refused && a.Done >= w[0] && a.Done <= w[1] {
						lost += o.qty
					}
				}
			}
		}
		if excused[sku] > lost {
			c.add("3", sku, -1, "%d units compensated, more than the %d the faults that struck its master could have lost "+
				"(units answered 202 or unknown within %s of them)", excused[sku], lost, lossWindow)
		}
	}
}

// checkLimits is check L: per SKU with a purchase limit, every customer
// with units invoiced of it has at most the loosest limit that may have
// been in force while one of those orders was placed (README: an order
// keeps the limit it was accepted under).
func (c *checker) checkLimits() {
	units := map[string]int{} // sku NUL customer -> units invoiced, 0 for one with orders but none invoiced
	bound := map[string]int{} // sku NUL customer -> the loosest limit of its invoiced orders
	for _, id := range sortedKeys(c.e.orders) {
		o := c.e.orders[id]
		if c.ri.Limits[o.sku] <= 0 || o.customer == "" {
			continue
		}
		k := o.sku + "\x00" + o.customer
		units[k] += 0
		if !o.invoiced() {
			continue
		}
		units[k] += o.qty
		from, to := time.Duration(0), time.Duration(math.MaxInt64)
		if i := c.opOf(id); i >= 0 {
			as := c.h.ops[i].attempts
			from, to = c.h.attempts[as[0]].Sent, c.h.attempts[as[len(as)-1]].Done
		}
		bound[k] = max(bound[k], c.loosestLimit(o.sku, from, to))
	}
	for _, k := range sortedKeys(units) {
		sku, customer, _ := strings.Cut(k, "\x00")
		c.judged["L"]++
		if units[k] > bound[k] {
			c.add("L", sku, -1, "customer %s has %d units invoiced, past the purchase limit %d in force while its orders were placed",
				customer, units[k], bound[k])
		}
	}
}

// loosestLimit is the loosest purchase limit sku may have applied to an
// order placed from `from` to `to`: of the one loaded and the loads the
// test sent, in order, one answered 200 before `from` sets it (the loads
// before it no longer count), one refused (400, 409) changes nothing, and
// any other (sent before `to`, or answered 200 after `from`: in flight)
// may have set its limit or not. In a run whose faults could lose Redis
// writes every load stays possible after its answer: a failover may have
// undone it in Redis until the reconciler set it back.
func (c *checker) loosestLimit(sku string, from, to time.Duration) int {
	ls := slices.Clone(c.h.limits)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].At < ls[j].At })
	set := []int{c.ri.Limits[sku]}
	for _, l := range ls {
		switch {
		case l.SKU != sku || l.At > to || l.Status == http.StatusBadRequest || l.Status == http.StatusConflict:
		case l.Status == http.StatusOK && l.Done < from && !c.lossyRun():
			set = []int{l.Limit}
		default:
			set = append(set, l.Limit)
		}
	}
	if slices.Contains(set, 0) {
		return math.MaxInt // no limit may have been in force
	}
	return slices.Max(set)
}

// lossyRun tells whether a fault of the run could have lost a Redis
// master's last writes (a failover).
func (c *checker) lossyRun() bool {
	for _, f := range c.ri.Faults {
		if f.Kind.losesRedisWrites() {
			return true
		}
	}
	return false
}

// checkPolls is check 8.
func (c *checker) checkPolls() {
	for _, id := range sortedKeys(c.h.polls) {
		seen := c.h.polls[id]
		c.judged["8"]++
		end := c.e.order(id)
		if seen["invoiced"] && end.invoices == 0 {
			c.add("8", end.sku, c.opOf(id), "a poll saw %s invoiced; it ended %q", id, end.status)
		}
		if seen["rejected"] && end.status != "rejected" {
			c.add("8", end.sku, c.opOf(id), "a poll saw %s rejected; it ended %q", id, end.status)
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
