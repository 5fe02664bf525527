//go:build faults

package faults

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The checks, as numbered in the reports:
//
//	1 never oversell: per SKU, invoiced units <= MySQL stock and products.sold == invoiced units
//	2 at most one invoice per order id, matching its orders row and the order's body, for orders
//	  the clients placed; one Idempotency-Key names one order
//	3 every order answered 202 ends invoiced (rejected with a reason naming a failover or a
//	  compensation is the documented exception, counted apart)
//	4 an order answered "not taken" (400, 404, 409, 413, 422, 429, 503 unavailable) is never invoiced
//	5 an unknown outcome (503 outcome_unknown, a transport error) ends settled: invoiced or
//	  rejected, or absent with no reservation left; a later definite answer to a retry with the
//	  same key agrees with the end state
//	6 after reconcile, per SKU in Redis: avail + reserved + sold == stock, sold and stock equal
//	  MySQL's, no reservation left open
//	7 stock not lost: after the sale, a reconcile and a mop-up that bought until sold out, every
//	  unit is sold (MySQL sold == stock); 7b: no first request answered 409 sold_out while
//	  every sample of Redis's avail (taken every 50ms) from a second before it was sent to
//	  200ms after its answer held enough units: the sold-out hint may lag by twice its TTL
//	  (200ms), not by a second
//	8 a status poll that saw an order invoiced or rejected agrees with its end state
const (
	soldOutBefore  = time.Second
	soldOutAfter   = 200 * time.Millisecond
	soldOutSamples = 15 // of the 24 or so a healthy sampler takes in the window
)

type violation struct {
	check string
	sku   string
	op    int // -1: not about one order
	msg   string
}

type checker struct {
	h      *history
	e      *endState
	skus   []string
	mopped map[string]bool
	vs     []violation
	excuse []violation // 202s rejected for a documented reason
}

func (c *checker) add(check, sku string, op int, format string, args ...any) {
	c.vs = append(c.vs, violation{check: check, sku: sku, op: op, msg: fmt.Sprintf(format, args...)})
}

func runChecks(h *history, e *endState, skus []string, mopped map[string]bool) *checker {
	c := &checker{h: h, e: e, skus: skus, mopped: mopped}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, sku := range skus {
		c.checkBooks(sku)
		c.checkRedis(sku)
	}
	for i, o := range h.ops {
		c.checkOrder(i, o)
	}
	c.checkUnclaimed()
	c.checkSoldOutAnswers()
	c.checkPolls()
	return c
}

// checkBooks runs checks 1 and 7 for a SKU.
func (c *checker) checkBooks(sku string) {
	s := c.e.skus[sku]
	if s.invQty > s.mysqlStock {
		c.add("1", sku, -1, "oversold: %d units invoiced, MySQL stock %d", s.invQty, s.mysqlStock)
	}
	if s.mysqlSold != s.invQty {
		c.add("1", sku, -1, "products.sold %d but invoices hold %d units", s.mysqlSold, s.invQty)
	}
	if s.mysqlSold != s.mysqlStock {
		c.add("7", sku, -1, "units left unsold after the mop-up: MySQL stock %d sold %d; Redis avail %d "+
			"reserved %d sold %d; mop-up ended on sold out: %v", s.mysqlStock, s.mysqlSold, s.rAvail,
			sum(s.resv), s.rSold, c.mopped[sku])
	}
}

// checkRedis runs check 6 for a SKU.
func (c *checker) checkRedis(sku string) {
	s := c.e.skus[sku]
	if s.redisErr != "" {
		c.add("6", sku, -1, "cannot read Redis: %s", s.redisErr)
		return
	}
	if s.rAvail+sum(s.resv)+s.rSold != s.rStock || s.rSold != s.mysqlSold || s.rStock != s.mysqlStock {
		c.add("6", sku, -1, "Redis avail %d + reserved %d + sold %d, stock %d; MySQL stock %d sold %d",
			s.rAvail, sum(s.resv), s.rSold, s.rStock, s.mysqlStock, s.mysqlSold)
	}
	for id, qty := range s.resv {
		c.add("6", sku, c.opOf(id), "reservation of %d units left open for %s", qty, id)
	}
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
	end := c.e.order(o.id)
	invoiced := end.invoices > 0 || end.status == "invoiced"
	if end.invoices > 1 {
		c.add("2", o.sku, i, "%d invoices", end.invoices)
	}
	if invoiced && (end.invoices == 0 || end.status != "invoiced" || end.invQty != o.qty || end.sku != o.sku) {
		c.add("2", o.sku, i, "invoice and order row disagree with each other or with the order placed")
	}
	if len(o.otherIDs) > 0 {
		c.add("2", o.sku, i, "one Idempotency-Key, several orders: %s and %s", o.id, strings.Join(o.otherIDs, ", "))
	}
	var has202, unknownBefore bool
	for _, ai := range o.attempts {
		has202 = has202 || c.h.attempts[ai].Status == http.StatusAccepted
	}
	if has202 {
		if !invoiced {
			c.checkAccepted(i, o, end)
		}
		return
	}
	last := c.h.attempts[o.attempts[len(o.attempts)-1]]
	for _, ai := range o.attempts[:len(o.attempts)-1] {
		unknownBefore = unknownBefore || c.h.attempts[ai].outcome() == unknown
	}
	switch last.outcome() {
	case refused:
		if !invoiced {
			return
		}
		if unknownBefore {
			c.add("5", o.sku, i, "a retry with the same key was answered %s, yet the order was invoiced", last.answer())
		} else {
			c.add("4", o.sku, i, "answered %s (not taken), yet invoiced", last.answer())
		}
	case unknown:
		if !end.row && end.resv > 0 {
			c.add("5", o.sku, i, "outcome unknown (%s) and never settled: no MySQL order, %d units still reserved",
				last.answer(), end.resv)
		}
	}
}

// checkUnclaimed looks at the MySQL orders no op claims. One whose
// customer placed nothing is a phantom (check 2). The hammer's customer
// has many orders and the test cannot name the order of a hammer request
// no answer named: its unclaimed invoiced orders may not outnumber its
// requests of unknown outcome (check 4).
func (c *checker) checkUnclaimed() {
	claimed, customers := map[string]bool{}, map[string]bool{}
	var hammer string
	var hammerUnknown, hammerUnnamed []int
	for i, o := range c.h.ops {
		claimed[o.id], customers[o.customer] = true, true
		for _, id := range o.otherIDs {
			claimed[id] = true
		}
		if o.kind != "hammer" || o.id != "" {
			continue
		}
		hammer = o.customer
		hammerUnnamed = append(hammerUnnamed, i)
		if c.h.attempts[o.attempts[len(o.attempts)-1]].outcome() == unknown {
			hammerUnknown = append(hammerUnknown, i)
		}
	}
	var unclaimed []string
	for id, o := range c.e.orders {
		switch {
		case claimed[id] || !o.row && o.invoices == 0:
		case !customers[o.customer]:
			c.add("2", o.sku, -1, "order %s of customer %q is in MySQL (%s, %d invoices) but no client placed it",
				id, o.customer, o.status, o.invoices)
		case o.customer == hammer && o.invoices > 0:
			unclaimed = append(unclaimed, id)
		}
	}
	if len(unclaimed) > len(hammerUnknown) {
		sort.Strings(unclaimed)
		c.add("4", c.skus[0], -1, "the hammer's customer has %d invoiced orders no answer named, but only %d of its "+
			"requests had an unknown outcome: the others were answered not taken (%s); invoiced: %s",
			len(unclaimed), len(hammerUnknown), c.refusedAnswers(hammerUnnamed), strings.Join(unclaimed, " "))
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

func (c *checker) checkAccepted(i int, o *op, end *orderEnd) {
	if end.status == "rejected" && (strings.Contains(end.reason, "failover") || strings.Contains(end.reason, "compensat")) {
		c.excuse = append(c.excuse, violation{check: "3", sku: o.sku, op: i, msg: "rejected: " + end.reason})
		return
	}
	c.add("3", o.sku, i, "answered 202 but not invoiced")
}

// checkSoldOutAnswers is check 7b.
func (c *checker) checkSoldOutAnswers() {
	for i, o := range c.h.ops {
		a := c.h.attempts[o.attempts[0]]
		if a.Status != http.StatusConflict || a.Code != "sold_out" {
			continue
		}
		n, low := 0, false
		for _, s := range c.h.samples[o.sku] {
			if s.at >= a.Sent-soldOutBefore && s.at <= a.Done+soldOutAfter {
				n++
				low = low || s.avail < o.qty
			}
		}
		if n >= soldOutSamples && !low {
			c.add("7b", o.sku, i, "answered 409 sold_out while Redis held at least %d units in all %d samples "+
				"from %s before the request to %s after its answer", o.qty, n, soldOutBefore, soldOutAfter)
		}
	}
}

// checkPolls is check 8.
func (c *checker) checkPolls() {
	for id, seen := range c.h.polls {
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
