package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/reconcile"
)

// TestRepairs seeds each state a failover (or a dead gateway) leaves,
// reconciles, and compares the SKU's whole resulting state.
func TestRepairs(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	old := now.Add(-10 * time.Minute)
	cases := []struct {
		name  string
		stock int
		// seed prepares the SKU and returns the orders whose state matters.
		seed    func(sku string) []order.Order
		want    func(sku string, os []order.Order) state
		outcome admin.SKUOutcome
		// republished is how many of the orders were published again.
		republished int
	}{{
		name: "consistent SKU is left alone", stock: 10,
		seed: func(sku string) []order.Order {
			o1, o2 := ord(sku, 1, 1), ord(sku, 2, 1)
			e.reserveAt(o1, now)
			e.reserveAt(o2, old)
			e.work(o2)
			return []order.Order{o1, o2}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 8, Sold: 1, Reserved: 1, Reservations: ids(os[0]),
				States: map[string]string{os[0].ID: "A", os[1].ID: "C"}}
		},
		outcome: admin.SKUConsistent,
	}, {
		name: "commit lost, reservation kept: committed", stock: 10,
		seed: func(sku string) []order.Order {
			o := ord(sku, 1, 2)
			e.reserveAt(o, old)
			e.process(o)
			return []order.Order{o}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 8, Sold: 2, States: map[string]string{os[0].ID: "C"}}
		},
		outcome: admin.SKURepaired,
	}, {
		name: "reservation and commit lost: committed from avail", stock: 10,
		seed: func(sku string) []order.Order {
			o := ord(sku, 1, 3)
			e.process(o)
			return []order.Order{o}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 7, Sold: 3, States: map[string]string{os[0].ID: "C"}}
		},
		outcome: admin.SKURepaired,
	}, {
		name: "rejected order's reservation released, stock aligned", stock: 1,
		seed: func(sku string) []order.Order {
			if _, err := e.st.SetStock(context.Background(), sku, 2, 0); err != nil { // Redis believes 2
				t.Fatal(err)
			}
			o1, o2 := ord(sku, 1, 1), ord(sku, 2, 1)
			e.reserveAt(o1, now)
			e.work(o1)
			e.reserveAt(o2, now)
			if res := e.process(o2); res.Status != order.StatusRejected {
				t.Fatalf("o2 %+v, want rejected", res)
			}
			return []order.Order{o1, o2}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 1, Avail: 0, Sold: 1,
				States: map[string]string{os[0].ID: "C", os[1].ID: "X"}}
		},
		outcome: admin.SKURepaired,
	}, {
		// The order may be queued, in a tier or a dead letter, or never
		// published: it is published again, and keeps its units.
		name: "reservation past grace with no order published again, kept", stock: 10,
		seed: func(sku string) []order.Order {
			o1, o2 := ord(sku, 1, 4), ord(sku, 2, 1)
			e.reserveAt(o1, old)
			e.reserveAt(o2, now)
			return []order.Order{o1, o2}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 5, Reserved: 5, Reservations: ids(os[0], os[1]),
				States: map[string]string{os[0].ID: "R1", os[1].ID: "A"}}
		},
		republished: 1,
		outcome:     admin.SKURepaired,
	}, {
		name: "sold and avail drifted: aligned and recomputed", stock: 10,
		seed: func(sku string) []order.Order {
			o := ord(sku, 1, 1)
			e.reserveAt(o, now)
			e.work(o)
			e.set(keys.Sold(sku), 5)
			e.set(keys.Avail(sku), 3)
			return []order.Order{o}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 9, Sold: 1, States: map[string]string{os[0].ID: "C"}}
		},
		outcome: admin.SKURepaired,
	}, {
		name: "stock lost from Redis: loaded from MySQL", stock: 10,
		seed: func(sku string) []order.Order {
			o := ord(sku, 1, 2)
			e.reserveAt(o, now)
			e.work(o)
			e.rdb.Del(context.Background(), keys.Stock(sku), keys.Avail(sku), keys.Sold(sku))
			return []order.Order{o}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 8, Sold: 2, States: map[string]string{os[0].ID: "C"}}
		},
		outcome: admin.SKURepaired,
	}, {
		name: "commit lost before the lookback window: sold aligned", stock: 10,
		seed: func(sku string) []order.Order {
			o := ord(sku, 1, 2)
			e.process(o)
			_, err := e.db.DB().Exec("UPDATE orders SET created_at = NOW(3) - INTERVAL 1 DAY WHERE order_id = ?", o.ID)
			if err != nil {
				t.Fatal(err)
			}
			return []order.Order{o}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 8, Sold: 2, States: map[string]string{os[0].ID: ""}}
		},
		outcome: admin.SKURepaired,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &published{}
			rec := e.reconciler(reconcile.Options{Grace: time.Minute, Lookback: time.Hour, Publisher: pub})
			sku := e.product(tc.stock)
			os := tc.seed(sku)
			rep := rec.SKU(context.Background(), sku, false)
			if rep.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%s), want %s", rep.Outcome, rep.Error, tc.outcome)
			}
			if diff := cmp.Diff(tc.want(sku, os), e.state(sku, os...)); diff != "" {
				t.Errorf("state after reconcile (-want +got):\n%s", diff)
			}
			if got := e.state(sku).Sold; got != e.mysqlSold(sku) {
				t.Errorf("redis sold %d, mysql sold %d", got, e.mysqlSold(sku))
			}
			wantRows := 0
			if tc.outcome == admin.SKURepaired {
				wantRows = 1
			}
			if n := e.repairs(sku, false); n != wantRows {
				t.Errorf("%d repairs recorded, want %d", n, wantRows)
			}
			if got := len(pub.ids()); got != tc.republished {
				t.Errorf("%d orders published again (%v), want %d", got, pub.ids(), tc.republished)
			}
			again := rec.SKU(context.Background(), sku, false)
			if again.Outcome != admin.SKUConsistent {
				t.Errorf("second run: %s %+v, want consistent", again.Outcome, again.Repairs)
			}
		})
	}
}

// TestRepublishBacksOff: an order that never reaches MySQL is published
// again after the grace period, then after twice that, and so on: never
// released, never dropped. Without a publisher it is reported unpublished
// and keeps its units.
func TestRepublishBacksOff(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.product(5)
	o := ord(sku, 1, 2)
	e.reserveAt(o, time.Now().Add(-90*time.Second))
	none := e.reconciler(reconcile.Options{Grace: time.Minute})
	rep := none.SKU(ctx, sku, false)
	if len(rep.Repairs) != 1 || len(rep.Repairs[0].Unpublished) != 1 {
		t.Fatalf("no publisher: %+v, want the order reported unpublished", rep.Repairs)
	}
	pub := &published{}
	rec := e.reconciler(reconcile.Options{Grace: time.Minute, Publisher: pub})
	run := func(age time.Duration) {
		t.Helper()
		e.reserveAt(o, time.Now().Add(-age))
		if rep := rec.SKU(ctx, sku, false); rep.Outcome == admin.SKUFailed {
			t.Fatal(rep.Error)
		}
	}
	run(90 * time.Second) // past the grace: published (R1)
	run(90 * time.Second) // under 2 x grace since: waits
	run(3 * time.Minute)  // past it: published (R2)
	run(3 * time.Minute)  // under 4 x grace: waits
	if got := pub.ids(); len(got) != 2 || got[0] != o.ID || got[1] != o.ID {
		t.Fatalf("published %v, want %s twice", got, o.ID)
	}
	if p := pub.orders[0]; p.SKU != sku || p.Qty != 2 || p.CustomerID != o.CustomerID {
		t.Fatalf("published %+v, want the reserved order %+v", p, o)
	}
	if s := e.state(sku, o); s.Reserved != 2 || s.Avail != 3 || s.States[o.ID] != "R2" {
		t.Fatalf("state %+v: the order must keep its units (state R2)", s)
	}
}

// TestReportCountsCompensations: an accepted order MySQL had no unit for
// (Redis believed in more stock) is counted in the SKU's report.
func TestReportCountsCompensations(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.product(1)
	if _, err := e.st.SetStock(ctx, sku, 2, 0); err != nil { // Redis believes 2
		t.Fatal(err)
	}
	o1, o2 := ord(sku, 1, 1), ord(sku, 2, 1)
	e.reserveAt(o1, time.Now())
	e.work(o1)
	e.reserveAt(o2, time.Now())
	if res := e.work(o2); res.Status != order.StatusRejected || res.Reason != order.ReasonCompensated {
		t.Fatalf("o2 %+v, want rejected as a compensation", res)
	}
	rep := e.reconciler(reconcile.Options{Lookback: time.Hour}).SKU(ctx, sku, false)
	if rep.Found == nil || rep.Found.Compensated != 1 {
		t.Fatalf("found %+v, want one compensated order", rep.Found)
	}
	var b strings.Builder
	if err := reconcile.Table(&b, admin.ReconcileReport{SKUs: []admin.SKUReport{rep}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1 accepted orders rejected (sold_out_after_acceptance)") {
		t.Fatalf("table does not show the compensation:\n%s", b.String())
	}
}

// TestUndoneOrderIsNeverRepublished: an order whose state says undone (U:
// its request was answered not taken) is not published again, even with a
// reservation past the grace period. (Since a copy of an undone reserve
// call is refused, such a reservation is not made any more; the reconciler
// does not rely on that.)
func TestUndoneOrderIsNeverRepublished(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.product(5)
	o := ord(sku, 1, 2)
	e.reserveAt(o, time.Now().Add(-90*time.Second))
	if err := e.rdb.Set(ctx, keys.OrderState(sku, o.ID), "U", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	pub := &published{}
	rec := e.reconciler(reconcile.Options{Grace: time.Minute, Publisher: pub})
	if rep := rec.SKU(ctx, sku, false); rep.Outcome == admin.SKUFailed {
		t.Fatal(rep.Error)
	}
	if got := pub.ids(); len(got) != 0 {
		t.Fatalf("published %v, want nothing: the order was answered not taken", got)
	}
}
