//go:build faults

package faults

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestReplayHistory runs the checker on recorded histories: hand-made ones
// that must pass and must fail (one per kind of violation), written as
// JSON lines and read back as a failing run's history is; and, when
// SURGE_FAULTS_HISTORY names a kept history.jsonl, that one, which fails
// the test if the checker still finds violations in it.
func TestReplayHistory(t *testing.T) {
	if path := os.Getenv("SURGE_FAULTS_HISTORY"); path != "" {
		ri, h, e, err := loadRun(path)
		if err != nil {
			t.Fatal(err)
		}
		c := runChecks(h, e, ri)
		t.Logf("samples judged per check: %s", c.judgedLine())
		_ = reportViolations(t, ri.Seed, c, nil)
		return
	}
	for _, tc := range replayCases() {
		t.Run(tc.name, func(t *testing.T) {
			ri, h, e := baseRun()
			tc.edit(ri, h, e)
			resolveIDs(h, e) // as readEnd does before a run's history is kept
			path := filepath.Join(t.TempDir(), "history.jsonl")
			if err := saveRun(path, ri, h, e); err != nil {
				t.Fatal(err)
			}
			ri, h, e, err := loadRun(path)
			if err != nil {
				t.Fatal(err)
			}
			c := runChecks(h, e, ri)
			var got []string
			for _, v := range c.vs {
				got = append(got, v.check+": "+v.msg)
				if !slices.Contains(tc.want, v.check) {
					t.Errorf("unexpected violation of check %s: %s", v.check, v.msg)
				}
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(c.vs, func(v violation) bool { return v.check == w }) {
					t.Errorf("want a violation of check %s; got %q", w, got)
				}
			}
			if tc.excused != len(c.excuse) {
				t.Errorf("excused %d 202s, want %d", len(c.excuse), tc.excused)
			}
		})
	}
}

type replayCase struct {
	name    string
	want    []string // the checks that must report a violation; none: the history passes
	excused int
	edit    func(*runInfo, *history, *endState)
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// baseRun is a small sale that keeps the promise: SKU s loaded with 10
// units, restocked to 12; six buyers of 2 units answered 202 and
// invoiced; one answered 409 sold_out while Redis had none; a patient
// buyer whose first try had an unknown outcome, then 503 unavailable, of
// which nothing remains; the hammer's 429; a memory alarm during the sale.
func baseRun() (*runInfo, *history, *endState) {
	ri := &runInfo{Seed: 42, SKUs: []string{"s"}, Loaded: map[string]int{"s": 10}, Mopped: map[string]bool{"s": true},
		Faults: []faultRecord{{Kind: memAlarm, Start: sec(1), End: sec(6), Effect: "memory alarm raised"}},
		Min:    map[string]int{"1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "6": 1, "7": 1, "7b": 1, "8": 1, "F": 1}}
	h := newHistory()
	e := &endState{skus: map[string]*skuEnd{}, orders: map[string]*orderEnd{}, byCustomer: map[string][]string{}}
	h.restocks = []restock{{At: sec(0.5), Done: sec(0.6), SKU: "s", Target: 12, Via: "gateway0 admin API", Status: 200}}
	for i := range 6 {
		id := "o" + string(rune('0'+i))
		addOp(h, "buyer", "c"+id, "s", 2, attempt{Sent: sec(2 + float64(i)*0.3), Done: sec(2.1 + float64(i)*0.3), Status: 202, OrderID: id})
		e.orders[id] = &orderEnd{row: true, sku: "s", customer: "c" + id, status: "invoiced", qty: 2, invoices: 1, invQty: 2, state: "C"}
		e.byCustomer["c"+id] = []string{id}
	}
	addOp(h, "buyer", "late", "s", 1, attempt{Sent: sec(4.9), Done: sec(5), Status: 409, Code: "sold_out"})
	addOp(h, "patient", "patient", "s", 1, attempt{Sent: sec(3), Done: sec(3.5), Status: 503, Code: "outcome_unknown"},
		attempt{Sent: sec(5.5), Done: sec(5.6), Status: 503, Code: "unavailable"})
	addOp(h, "hammer", "hammer", "s", 1, attempt{Sent: sec(2), Done: sec(2.01), Status: 429, Code: "rate_limited"})
	for at := sec(4); at < sec(10); at += 50 * time.Millisecond {
		h.samples["s"] = append(h.samples["s"], sample{At: at, Done: at + 2*time.Millisecond, Avail: 0})
	}
	h.notePollLocked("o0", "invoiced")
	e.skus["s"] = &skuEnd{mysqlStock: 12, mysqlSold: 12, invQty: 12, invoices: 6, rStock: 12, rSold: 12, resv: map[string]int{}}
	return ri, h, e
}

func addOp(h *history, kind, customer, sku string, qty int, as ...attempt) {
	o := &op{kind: kind, customer: customer, key: "k-" + customer, sku: sku, qty: qty}
	h.ops = append(h.ops, o)
	for n, a := range as {
		a.Op, a.N = len(h.ops)-1, n
		h.attempts = append(h.attempts, a)
		o.attempts = append(o.attempts, len(h.attempts)-1)
		o.nameID(a.OrderID)
	}
}

// opNamed returns the op of customer.
func opNamed(h *history, customer string) *op {
	for _, o := range h.ops {
		if o.customer == customer {
			return o
		}
	}
	panic("no op of " + customer)
}

// refuse turns buyer o0's 202 into answer, its order still invoiced.
func refuse(h *history, status int, code string) {
	a := &h.attempts[opNamed(h, "co0").attempts[0]]
	a.Status, a.Code, a.OrderID = status, code, ""
}

func replayCases() []replayCase {
	return []replayCase{
		{name: "the promise kept", edit: func(*runInfo, *history, *endState) {}},
		{name: "a compensation in a run that killed a Redis master", excused: 1, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Faults = append(ri.Faults, killedMaster(3, "s"))
			compensate(h, e)
		}},
		{name: "a compensation on a SKU whose master no fault struck", want: []string{"3"}, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Faults = append(ri.Faults, killedMaster(3, "other"))
			compensate(h, e)
		}},
		{name: "a compensation answered before the fault struck", want: []string{"3"}, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Faults = append(ri.Faults, killedMaster(7, "s"))
			compensate(h, e)
		}},
		{name: "more compensated than the fault could have lost", want: []string{"3"}, excused: 1, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Faults = append(ri.Faults, killedMaster(9, "s")) // no 202 in the 2 s before it
			compensate(h, e)
			h.attempts[opNamed(h, "co6").attempts[0]].Sent, h.attempts[opNamed(h, "co6").attempts[0]].Done = sec(9.7), sec(9.8)
		}},
		{name: "a purchase limit kept", edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Limits, ri.Min["L"] = map[string]int{"s": 2}, 6
		}},
		{name: "a customer past the purchase limit", want: []string{"L"}, edit: func(ri *runInfo, _ *history, e *endState) {
			ri.Limits = map[string]int{"s": 2}
			e.orders["o1"].customer = "co0"
		}},
		{name: "a limit lowered after the customer's orders were accepted", edit: func(ri *runInfo, h *history, e *endState) {
			ri.Limits = map[string]int{"s": 4}
			e.orders["o1"].customer = "co0"
			h.limits = []limitChange{{At: sec(5), Done: sec(5.1), SKU: "s", Limit: 2, Status: 200}}
		}},
		{name: "a limit raised before the customer's second order", edit: func(ri *runInfo, h *history, e *endState) {
			ri.Limits = map[string]int{"s": 2}
			e.orders["o1"].customer = "co0"
			h.limits = []limitChange{{At: sec(2.15), Done: sec(2.2), SKU: "s", Limit: 4, Status: 200}}
		}},
		{name: "a limit raise with no answer may have taken", edit: func(ri *runInfo, h *history, e *endState) {
			ri.Limits = map[string]int{"s": 2}
			e.orders["o1"].customer = "co0"
			h.limits = []limitChange{{At: sec(2.15), Done: sec(17), SKU: "s", Limit: 4, Err: "timeout"}}
		}},
		{name: "a customer past a limit lowered before its orders", want: []string{"L"}, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Limits = map[string]int{"s": 4}
			e.orders["o1"].customer = "co0"
			h.limits = []limitChange{{At: sec(1), Done: sec(1.1), SKU: "s", Limit: 3, Status: 200},
				{At: sec(1.5), Done: sec(1.6), SKU: "s", Limit: 5, Status: 409}}
		}},
		{name: "a 202 rejected for the limit in a run that killed a Redis master", excused: 1, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Limits = map[string]int{"s": 2}
			ri.Faults = append(ri.Faults, killedMaster(3, "s"))
			compensate(h, e)
			e.orders["o6"].reason = limitGuarded
		}},
		{name: "a 202 rejected for the limit on a SKU without one", want: []string{"3"}, edit: func(ri *runInfo, h *history, e *endState) {
			ri.Faults = append(ri.Faults, killedMaster(3, "s"))
			compensate(h, e)
			e.orders["o6"].reason = limitGuarded
		}},
		{name: "a compensation with no fault that loses Redis writes", want: []string{"3"}, edit: func(_ *runInfo, h *history, e *endState) {
			compensate(h, e)
		}},
		{name: "a 202 never invoiced, parked", want: []string{"3", "1", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			*e.orders["o5"] = orderEnd{dead: "retries_exhausted", customer: "co5", sku: "s"}
			e.skus["s"].invQty, e.skus["s"].invoices = 10, 5
		}},
		{name: "503 unavailable, yet invoiced", want: []string{"4"}, edit: func(_ *runInfo, h *history, _ *endState) {
			refuse(h, 503, "unavailable")
		}},
		{name: "409 sold_out, yet parked in the dead letters", want: []string{"4"}, edit: func(_ *runInfo, h *history, e *endState) {
			e.orders["ol"] = &orderEnd{dead: "retries_exhausted", customer: "late", sku: "s"}
			opNamed(h, "late").id = "ol"
		}},
		{name: "429, yet a reservation held at the end", want: []string{"4", "6"}, edit: func(_ *runInfo, h *history, e *endState) {
			addOp(h, "buyer", "rude", "s", 1, attempt{Sent: sec(3), Done: sec(3.1), Status: 429, Code: "rate_limited"})
			e.orders["or"] = &orderEnd{resv: 1, customer: "rude", sku: "s"}
			e.byCustomer["rude"] = []string{"or"}
			e.skus["s"].resv["or"] = 1
			opNamed(h, "rude").id = "or"
		}},
		{name: "the hammer's 429s, yet one of its orders invoiced", want: []string{"4", "1", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			e.orders["oh"] = &orderEnd{row: true, sku: "s", customer: "hammer", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
			e.skus["s"].invQty++
		}},
		{name: "a retry answered 429 after a 202 with the same key", want: []string{"5"}, edit: func(_ *runInfo, h *history, _ *endState) {
			o := opNamed(h, "co1")
			h.attempts = append(h.attempts, attempt{Op: 1, N: 1, Sent: sec(8), Done: sec(8.1), Status: 429, Code: "rate_limited"})
			o.attempts = append(o.attempts, len(h.attempts)-1)
		}},
		{name: "unknown, then not taken, yet invoiced", want: []string{"5"}, edit: func(_ *runInfo, h *history, e *endState) {
			h.restocks = append(h.restocks, restock{At: sec(0.7), Done: sec(0.8), SKU: "s", Target: 13, Status: 200})
			o := opNamed(h, "patient")
			o.id = "op"
			e.orders["op"] = &orderEnd{row: true, sku: "s", customer: "patient", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
			e.skus["s"].invQty, e.skus["s"].mysqlSold = 13, 13
			e.skus["s"].mysqlStock, e.skus["s"].rStock, e.skus["s"].rSold = 13, 13, 13
		}},
		{name: "a stale 409 sold_out", want: []string{"7b"}, edit: func(_ *runInfo, h *history, _ *endState) {
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(4.7) && s.At <= sec(5.1) {
					s.Avail = 3
				}
			}
		}},
		{name: "a 409 sold_out as the last unit goes", edit: func(_ *runInfo, h *history, _ *endState) {
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(4.75) && s.At <= sec(4.99) {
					s.Avail = int((sec(5) - s.At) / (50 * time.Millisecond))
				}
			}
		}},
		{name: "a 409 sold_out while another buyer held the last unit and gave it back", edit: func(ri *runInfo, h *history, _ *endState) {
			ri.Min["7b"] = 0 // the one 409 cannot be judged
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(4.7) && s.At <= sec(5.1) {
					s.Avail = 1
				}
			}
			addOp(h, "patient", "undone", "s", 1, attempt{Sent: sec(4.95), Done: sec(4.97), Status: 503, Code: "unavailable"})
		}},
		{name: "a stale 409 sold_out on a retry", want: []string{"7b"}, edit: func(_ *runInfo, h *history, _ *endState) {
			o := opNamed(h, "late")
			first := &h.attempts[o.attempts[0]]
			first.Status, first.Code = 503, "outcome_unknown"
			h.attempts = append(h.attempts, attempt{Op: 6, N: 1, Sent: sec(7.9), Done: sec(8), Status: 409, Code: "sold_out"})
			o.attempts = append(o.attempts, len(h.attempts)-1)
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(7.7) && s.At <= sec(8.1) {
					s.Avail = 1
				}
			}
		}},
		{name: "a 409 sold_out from a sighting older than its request", want: []string{"7b"}, edit: func(_ *runInfo, h *history, _ *endState) {
			// Units came back at +4.82s; the order was sent at +4.97s and
			// answered 409 at +5s from what Redis held before it came.
			late := &h.attempts[opNamed(h, "late").attempts[0]]
			late.Sent = sec(4.97)
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(4.82) && s.At <= sec(5.2) {
					s.Avail = 3
				}
			}
		}},
		{name: "a stale 409 sold_out repeated to a retry", want: []string{"7b"}, edit: func(_ *runInfo, h *history, _ *endState) {
			o := opNamed(h, "late")
			h.attempts = append(h.attempts, attempt{Op: 6, N: 1, Sent: sec(7.9), Done: sec(8), Status: 409, Code: "sold_out"})
			o.attempts = append(o.attempts, len(h.attempts)-1)
			for i := range h.samples["s"] {
				if s := &h.samples["s"][i]; s.At >= sec(7.7) && s.At <= sec(8.1) {
					s.Avail = 1
				}
			}
		}},
		{name: "409 sold_out only, yet invoiced", want: []string{"4", "1", "7"}, edit: func(_ *runInfo, h *history, e *endState) {
			opNamed(h, "late").id = "ol"
			e.orders["ol"] = &orderEnd{row: true, sku: "s", customer: "late", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
			e.skus["s"].invQty++
		}},
		{name: "unknown, then 409 sold_out, invoiced: the first attempt took a unit that came back", edit: func(_ *runInfo, h *history, e *endState) {
			restockTo13(h, e)
			o := opNamed(h, "late")
			first := &h.attempts[o.attempts[0]]
			first.Status, first.Code = 0, ""
			h.attempts = append(h.attempts, attempt{Op: 6, N: 1, Sent: sec(6), Done: sec(6.1), Status: 409, Code: "sold_out"})
			o.attempts = append(o.attempts, len(h.attempts)-1)
			o.id = "ol"
			e.orders["ol"] = &orderEnd{row: true, sku: "s", customer: "late", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
		}},
		{name: "409 sold_out, then 202 with the same key after a restock", edit: func(_ *runInfo, h *history, e *endState) {
			restockTo13(h, e)
			o := opNamed(h, "late")
			h.attempts = append(h.attempts, attempt{Op: 6, N: 1, Sent: sec(11), Done: sec(11.1), Status: 202, OrderID: "ol"})
			o.attempts = append(o.attempts, len(h.attempts)-1)
			o.nameID("ol")
			e.orders["ol"] = &orderEnd{row: true, sku: "s", customer: "late", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
		}},
		{name: "503 unavailable naming no order, yet its customer's order invoiced", want: []string{"4"}, edit: func(_ *runInfo, h *history, e *endState) {
			addOp(h, "buyer", "quiet", "s", 1, attempt{Sent: sec(3), Done: sec(3.1), Status: 503, Code: "unavailable"})
			e.orders["oq"] = &orderEnd{row: true, sku: "s", customer: "quiet", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
			e.byCustomer["quiet"] = []string{"oq"}
			restockTo13(h, e)
		}},
		{name: "two orders for one purchase", want: []string{"2", "1", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			e.orders["o0b"] = &orderEnd{row: true, sku: "s", customer: "co0", status: "invoiced", qty: 2, invoices: 1, invQty: 2}
			e.byCustomer["co0"] = append(e.byCustomer["co0"], "o0b")
			e.skus["s"].invQty = 14
		}},
		{name: "customers one unit past the purchase limit", want: []string{"L"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Limits = map[string]int{"s": 1} // each buyer holds 2
		}},
		{name: "a refused connection sent nothing, so excuses no orphan", want: []string{"4", "1", "7"}, edit: func(_ *runInfo, h *history, e *endState) {
			addOp(h, "hammer", "hammer", "s", 1, attempt{Sent: sec(2.5), Done: sec(2.5),
				Err: "dial tcp 127.0.0.1:18280: connect: " + syscall.ECONNREFUSED.Error()})
			e.orders["oh"] = &orderEnd{row: true, sku: "s", customer: "hammer", status: "invoiced", qty: 1, invoices: 1, invQty: 1}
			e.skus["s"].invQty++
		}},
		{name: "a kind of the deck never dealt", want: []string{"F"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Deck = []faultKind{memAlarm, killRedis}
		}},
		{name: "reconciler once failed", want: []string{"F"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Reconciles = []int{0, 2, 0}
		}},
		{name: "a stock the test never set", want: []string{"1", "6", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			e.skus["s"].mysqlStock = 11
		}},
		{name: "a restock without an answer may have happened", edit: func(_ *runInfo, h *history, e *endState) {
			h.restocks = append(h.restocks, restock{At: sec(1), Done: sec(16), SKU: "s", Target: 14, Status: 0, Err: "timeout"})
			e.orders["o6"] = &orderEnd{row: true, sku: "s", customer: "co6", status: "invoiced", qty: 2, invoices: 1, invQty: 2}
			addOp(h, "buyer", "co6", "s", 2, attempt{Sent: sec(8), Done: sec(8.1), Status: 202, OrderID: "o6"})
			s := e.skus["s"]
			s.mysqlStock, s.mysqlSold, s.invQty, s.invoices, s.rStock, s.rSold = 14, 14, 14, 7, 14, 14
		}},
		{name: "two invoices for one order", want: []string{"2", "1", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			e.orders["o2"].invoices, e.orders["o2"].invQty = 2, 4
			e.skus["s"].invQty = 14
		}},
		{name: "a poll saw invoiced, the order ended rejected", want: []string{"8", "3", "1", "7"}, edit: func(_ *runInfo, _ *history, e *endState) {
			*e.orders["o0"] = orderEnd{row: true, sku: "s", customer: "co0", status: "rejected", reason: "conflict", qty: 2}
			e.skus["s"].invQty = 10
		}},
		{name: "units left unsold", want: []string{"7"}, edit: func(_ *runInfo, h *history, e *endState) {
			s := e.skus["s"]
			s.rAvail, s.rSold, s.mysqlSold, s.invQty = 2, 10, 10, 10
			delete(e.orders, "o5")
			delete(e.byCustomer, "co5")
			o := opNamed(h, "co5")
			o.id = ""
			a := &h.attempts[o.attempts[0]]
			a.Status, a.Code, a.OrderID = 503, "unavailable", ""
		}},
		{name: "a fault with no effect", want: []string{"F"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Faults[0].Effect = ""
		}},
		{name: "a fault not dealt", want: []string{"F"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Faults[0].Err = "rabbitmqctl: exit 69"
		}},
		{name: "a worker died unasked", want: []string{"F"}, edit: func(_ *runInfo, h *history, _ *endState) {
			h.deaths = append(h.deaths, death{Name: "worker1", At: sec(3), Exit: "signal: segmentation fault"})
		}},
		{name: "a worker that failed to start was started again", edit: func(_ *runInfo, h *history, _ *endState) {
			h.deaths = append(h.deaths, death{Name: "worker1", At: sec(3), AtStart: true,
				Exit: "exit status 1: worker: redis cluster: load script on 127.0.0.1:7201: i/o timeout"})
		}},
		{name: "faults that met no sale", want: []string{"F"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Faults[0].Start, ri.Faults[0].End = sec(20), sec(21)
		}},
		{name: "too few samples for the default minimums", want: []string{"min"}, edit: func(ri *runInfo, _ *history, _ *endState) {
			ri.Min = nil
		}},
	}
}

// killedMaster is a SIGKILL of the master serving skus, struck at second
// at and healed two seconds later.
func killedMaster(at float64, skus ...string) faultRecord {
	return faultRecord{Kind: killRedis, Start: sec(at), End: sec(at + 2), Effect: "node gone", SKUs: skus}
}

// restockTo13 adds a restock of s to 13 units after the sale and sells
// the 13th unit (its order is the test's to add).
func restockTo13(h *history, e *endState) {
	h.restocks = append(h.restocks, restock{At: sec(10), Done: sec(10.1), SKU: "s", Target: 13, Status: 200})
	sk := e.skus["s"]
	sk.invQty, sk.mysqlSold, sk.mysqlStock, sk.rStock, sk.rSold = 13, 13, 13, 13, 13
}

// compensate adds a seventh order answered 202 that Redis oversold and
// MySQL refused: rejected as the compensation.
func compensate(h *history, e *endState) {
	addOp(h, "buyer", "co6", "s", 2, attempt{Sent: sec(3.9), Done: sec(4), Status: 202, OrderID: "o6"})
	e.orders["o6"] = &orderEnd{row: true, sku: "s", customer: "co6", status: "rejected", reason: compensation, qty: 2, state: "X"}
}
