package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// TestRepairKeepsWritesMadeAfterTheRead runs the repair script with a view
// that live traffic made stale: a commit moved sold and took a
// reservation the plan wanted to release. The script must keep both.
func TestRepairKeepsWritesMadeAfterTheRead(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	st := stock.New(rdb, stock.Options{})
	sku := testenv.Unique("rec-race-")
	testenv.CleanupSKU(t, rdb, sku)
	if _, err := st.SetStock(ctx, sku, 10, 0); err != nil {
		t.Fatal(err)
	}
	o := order.Order{ID: order.IDFor("c", sku, 0), SKU: sku, Qty: 2, CustomerID: "c"}
	if _, err := st.Reserve(ctx, o); err != nil {
		t.Fatal(err)
	}
	v, err := readView(ctx, rdb, sku)
	if err != nil {
		t.Fatal(err)
	}
	// MySQL (as read) rejected the order, so the plan releases its
	// reservation; meanwhile a worker's commit moves it to sold (a later
	// delivery, processed after a restock): the release must not undo it.
	truth := Truth{Stock: 10, Sold: 0, Orders: map[string]OrderFact{o.ID: {ID: o.ID, Status: "rejected", Qty: 2}}}
	p := makePlan(v, truth, nil, time.Minute)
	if len(p.releases) != 1 {
		t.Fatalf("plan %+v, want the rejected order's reservation released", p)
	}
	if _, err := st.Commit(ctx, sku, o.ID, o.Qty); err != nil {
		t.Fatal(err)
	}

	ch, err := apply(ctx, rdb, sku, v, truth, p, "60", false)
	if err != nil {
		t.Fatal(err)
	}
	want := admin.Changes{
		Before:  admin.Counters{Loaded: true, Stock: 10, Avail: 8, Sold: 2},
		After:   admin.Counters{Loaded: true, Stock: 10, Avail: 8, Sold: 2},
		Aligned: false,
	}
	if diff := cmp.Diff(want, ch); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if s, _ := st.State(ctx, sku, o.ID); s != "C" {
		t.Errorf("order state %q, want C", s)
	}
}

func TestPlan(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	held := func(qty int, age time.Duration) string {
		return fmt.Sprintf("%d:%d", qty, now.Add(-age).UnixMilli())
	}
	v := view{now: now, resv: map[string]string{
		"inv": held(1, time.Second), "rej": held(2, time.Second),
		"stale": held(3, time.Hour), "fresh": held(4, time.Second),
	}}
	truth := Truth{
		Orders: map[string]OrderFact{
			"inv": {ID: "inv", Status: "invoiced", Qty: 1},
			"rej": {ID: "rej", Status: "rejected", Qty: 2},
		},
		Invoiced: []OrderFact{{ID: "inv", Qty: 1}, {ID: "lost", Qty: 5}, {ID: "done", Qty: 6}},
	}
	p := makePlan(v, truth, map[string]bool{"done": true}, time.Minute)
	type result struct {
		Commits  []commitOp
		Releases []releaseOp
		Adopts   []releaseOp
		Why      map[string]string
	}
	got := result{p.commits, p.releases, p.adopts, p.why}
	want := result{
		Commits:  []commitOp{{id: "inv", qty: 1}, {id: "lost", qty: 5}},
		Releases: []releaseOp{{id: "rej", held: v.resv["rej"]}},
		Adopts:   []releaseOp{{id: "stale", held: v.resv["stale"]}},
		Why:      map[string]string{"inv": whyInvoiced, "lost": whyInvoiced, "rej": whyRejected, "stale": whyNoOrder},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(commitOp{}, releaseOp{})); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
