//go:build chaos

package chaos

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/idem"
	"surge/pkg/keys"
	"surge/pkg/metrics"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/worker"
)

// TestReservationWithoutPublishIsPublished: a gateway that died between
// its reservation and its publish leaves units reserved for an order no
// queue holds, and its buyer without an answer. Once the grace period has
// passed the reconciler publishes the order again (it cannot know the
// order is not queued: releasing it could resell the units of an accepted
// order), and the worker invoices it; a reservation still within the
// grace is left alone. The checkout's retry with the same key is answered
// 202 for that order, which is invoiced once.
func TestReservationWithoutPublishIsPublished(t *testing.T) {
	ctx := context.Background()
	p := startPipeline(t)
	sku := testenv.Unique("chaos-nopub-")
	p.loadStock(sku, 5)

	// The dead gateway's steps: claim the idempotency record and reserve
	// (a minute ago), then nothing.
	customer, key := "c-"+sku, "k1"
	dead := order.Order{SKU: sku, Qty: 2, CustomerID: customer}
	claim, err := idem.New(p.redis, 0).Claim(ctx, dead, key)
	if err != nil {
		t.Fatal(err)
	}
	dead.ID = claim.OrderID
	if _, err := p.stock.Reserve(ctx, dead); err != nil {
		t.Fatal(err)
	}
	p.age(sku, dead.ID, time.Minute)
	// Another reservation, made just now: its order may still be on its
	// way to the queue.
	fresh := order.Order{ID: order.IDFor(customer, "k2", 1), SKU: sku, Qty: 1, CustomerID: customer}
	if _, err := p.stock.Reserve(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	rep := p.reconciler().Run(ctx, false, sku)
	if rep.ExitCode != reconcile.ExitRepaired || len(rep.SKUs[0].Repairs) != 1 {
		t.Fatalf("reconcile: %+v, want one repair", rep)
	}
	if diff := cmp.Diff([]string{dead.ID}, rep.SKUs[0].Repairs[0].Republished); diff != "" {
		t.Errorf("published again (-want +got):\n%s", diff)
	}
	// The worker commits the order in MySQL, then in Redis: wait for both.
	var v stock.View
	testkit.WaitFor(t, "the dead gateway's order to be invoiced and committed in Redis", 30*time.Second, func() (bool, error) {
		c, err := testkit.OrderStatuses(context.Background(), p.db, []string{dead.ID})
		if err != nil || c["invoiced"] != 1 {
			return false, err
		}
		v, err = p.stock.View(ctx, sku)
		return err == nil && v.Sold == 2, err
	})
	if _, kept := v.Reservations[fresh.ID]; v.Sold != 2 || v.Reserved != 1 || !kept || !v.Consistent() {
		t.Fatalf("after reconcile: %+v, want the order sold and the fresh reservation kept", v)
	}

	// The checkout retries the dead order with the same key.
	duplicates := workerOutcomes(t, worker.OutcomeDuplicate)
	id := p.post(t, customer, key, `{"sku":"`+sku+`","qty":2,"customer_id":"`+customer+`"}`)
	if id != dead.ID {
		t.Fatalf("retry accepted as %s, want %s", id, dead.ID)
	}
	testkit.WaitFor(t, "the worker to see the retry's message as a duplicate", 30*time.Second, func() (bool, error) {
		return workerOutcomes(t, worker.OutcomeDuplicate) > duplicates, nil
	})
	if c, err := testkit.OrderStatuses(context.Background(), p.db, []string{id}); err != nil || c["invoiced"] != 1 {
		t.Fatalf("after the retry: %v %v, want the order invoiced once", c, err)
	}
	if v, _ = p.stock.View(ctx, sku); !v.Consistent() || v.Sold != 2 || v.Sold != p.mysqlSold(sku) {
		t.Errorf("after the retry: %+v, mysql sold %d; want sold 2 in both", v, p.mysqlSold(sku))
	}
}

// workerOutcomes is the count of deliveries the workers of this process
// handled with outcome (surge_worker_orders_total).
func workerOutcomes(t *testing.T, outcome string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "surge_worker_orders_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// age moves a reservation's time back by d, as if it was made d ago.
func (p *pipeline) age(sku, id string, d time.Duration) {
	p.t.Helper()
	ctx := context.Background()
	v, err := p.redis.HGet(ctx, keys.Resv(sku), id).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	h, err := stock.ParseHeld(v)
	if err != nil {
		p.t.Fatal(err)
	}
	f := strings.SplitN(v, ":", 3)
	f[1] = strconv.FormatInt(h.ReservedAt.Add(-d).UnixMilli(), 10)
	if err := p.redis.HSet(ctx, keys.Resv(sku), id, strings.Join(f, ":")).Err(); err != nil {
		p.t.Fatal(err)
	}
}

// post places an order and returns its id, failing unless it got 202.
func (p *pipeline) post(t *testing.T, customer, key, body string) string {
	t.Helper()
	a := p.send(t, key, body)
	if a.Status != http.StatusAccepted {
		t.Fatalf("order by %s: %d %s", customer, a.Status, a.raw)
	}
	return a.OrderID
}
