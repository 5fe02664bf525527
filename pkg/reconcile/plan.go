package reconcile

import (
	"sort"
	"time"

	"surge/pkg/order"
	"surge/pkg/stock"
)

// Why an order is acted upon, as recorded in Found.Orders.
const (
	whyInvoiced = "invoiced"
	whyRejected = "rejected"
	whyNoOrder  = "no_order"
)

// plan is what one round will ask the repair script to do, and which
// orders it will publish again (adopt.lua).
type plan struct {
	commits  []commitOp
	releases []releaseOp
	adopts   []releaseOp
	why      map[string]string
}

// commitOp commits an order MySQL invoiced, with MySQL's quantity.
type commitOp struct {
	id  string
	qty int
}

// releaseOp releases (or adopts) a reservation if it still holds the
// value read.
type releaseOp struct {
	id, held string
}

// makePlan decides the repairs (README, Reconciler) from one Redis view and one
// MySQL snapshot:
//   - a reservation whose order MySQL invoiced is committed;
//   - an order MySQL invoiced within the lookback window whose state is
//     not C (its commit was lost, or is still on its way) is committed:
//     the worker's own commit then finds C and changes nothing;
//   - a reservation whose order MySQL rejected is released;
//   - a reservation older than grace (on the master's clock) with no MySQL
//     order is adopted: published again, never released. Its order may be
//     in the queue behind a backlog, in a retry tier or the dead letters
//     (accepted: it must be invoiced), or never have reached the broker
//     (its answer was unknown, or never given); the worker settles it
//     either way, once.
//
// committed holds the invoiced orders already in state C. Orders are
// sorted by id so that the script's work is reproducible.
func makePlan(v view, t Truth, committed map[string]bool, grace time.Duration) plan {
	p := plan{why: map[string]string{}}
	for _, id := range sortedKeys(v.resv) {
		o, found := t.Orders[id]
		switch {
		case found && o.Status == string(order.StatusInvoiced):
			p.commits = append(p.commits, commitOp{id: id, qty: o.Qty})
			p.why[id] = whyInvoiced
		case found && o.Status == string(order.StatusRejected):
			p.releases = append(p.releases, releaseOp{id: id, held: v.resv[id]})
			p.why[id] = whyRejected
		case !found && stale(v.resv[id], v.now, grace):
			p.adopts = append(p.adopts, releaseOp{id: id, held: v.resv[id]})
			p.why[id] = whyNoOrder
		}
	}
	for _, o := range t.Invoiced {
		if _, held := v.resv[o.ID]; held || committed[o.ID] {
			continue
		}
		if _, dup := p.why[o.ID]; dup {
			continue
		}
		p.commits = append(p.commits, commitOp{id: o.ID, qty: o.Qty})
		p.why[o.ID] = whyInvoiced
	}
	sort.Slice(p.commits, func(i, j int) bool { return p.commits[i].id < p.commits[j].id })
	return p
}

// stale reports whether a reservation was made more than grace ago. A
// malformed value is never stale: readView already refused it.
func stale(held string, now time.Time, grace time.Duration) bool {
	h, err := stock.ParseHeld(held)
	return err == nil && now.Sub(h.ReservedAt) > grace
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
