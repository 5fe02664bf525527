package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		outcome reconcile.Outcome
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
		outcome: reconcile.Consistent,
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
		outcome: reconcile.Repaired,
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
		outcome: reconcile.Repaired,
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
		outcome: reconcile.Repaired,
	}, {
		name: "reservation past grace with no order released, fresh one kept", stock: 10,
		seed: func(sku string) []order.Order {
			o1, o2 := ord(sku, 1, 4), ord(sku, 2, 1)
			e.reserveAt(o1, old)
			e.reserveAt(o2, now)
			return []order.Order{o1, o2}
		},
		want: func(sku string, os []order.Order) state {
			return state{Loaded: true, Stock: 10, Avail: 9, Reserved: 1, Reservations: ids(os[1]),
				States: map[string]string{os[0].ID: "X", os[1].ID: "A"}}
		},
		outcome: reconcile.Repaired,
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
		outcome: reconcile.Repaired,
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
		outcome: reconcile.Repaired,
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
		outcome: reconcile.Repaired,
	}}
	rec := e.reconciler(reconcile.Options{Grace: time.Minute, Lookback: time.Hour})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
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
			if tc.outcome == reconcile.Repaired {
				wantRows = 1
			}
			if n := e.repairs(sku, false); n != wantRows {
				t.Errorf("%d repairs recorded, want %d", n, wantRows)
			}
			again := rec.SKU(context.Background(), sku, false)
			if again.Outcome != reconcile.Consistent {
				t.Errorf("second run: %s %+v, want consistent", again.Outcome, again.Repairs)
			}
		})
	}
}
