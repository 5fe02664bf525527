package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/lua"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/reconcile"
)

// limitedProduct creates a SKU with total units and a purchase limit in
// MySQL and Redis.
func (e *env) limitedProduct(total, limit int) string {
	e.t.Helper()
	sku := e.product(total)
	if _, err := e.db.SetStockWith(context.Background(), sku, total, nil, nil, &limit, nil); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.SetStockLimit(context.Background(), sku, total, 0, &limit); err != nil {
		e.t.Fatal(err)
	}
	return sku
}

func (e *env) count(sku, customer string) int {
	e.t.Helper()
	n, err := e.rdb.Get(context.Background(), keys.CustomerUnits(sku, customer)).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) setCount(sku, customer string, n int) {
	e.t.Helper()
	if err := e.rdb.Set(context.Background(), keys.CustomerUnits(sku, customer), n, 0).Err(); err != nil {
		e.t.Fatal(err)
	}
}

func buyer(sku, customer string, n, qty int) order.Order {
	return order.Order{ID: order.IDFor(customer, fmt.Sprint(sku, n), 0), SKU: sku, Qty: qty, CustomerID: customer}
}

// TestRepairCustomerCounts: a failover lost customer counts (an increment,
// a commit's units) or kept one a release had lowered; the reconciler sets
// each count to what MySQL invoiced plus the open counted reservations, a
// dry run only reports, and the limit then holds again.
func TestRepairCustomerCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.limitedProduct(20, 2)
	ann, bob, cat := testenv.Unique("ann-"), testenv.Unique("bob-"), testenv.Unique("cat-")
	// ann: two units reserved, one of them invoiced and committed; the
	// count is lost.
	a1, a2 := buyer(sku, ann, 1, 1), buyer(sku, ann, 2, 1)
	for _, o := range []order.Order{a1, a2} {
		if _, err := e.st.Reserve(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.Process(ctx, a1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Commit(ctx, sku, a1.ID, 1); err != nil {
		t.Fatal(err)
	}
	e.setCount(sku, ann, 0)
	// bob: one unit invoiced and committed, count lost.
	b1 := buyer(sku, bob, 1, 1)
	if _, err := e.st.Reserve(ctx, b1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Process(ctx, b1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Commit(ctx, sku, b1.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(ctx, keys.CustomerUnits(sku, bob)).Err(); err != nil {
		t.Fatal(err)
	}
	// cat: one unit reserved, the count too high (a release it lost).
	if _, err := e.st.Reserve(ctx, buyer(sku, cat, 1, 1)); err != nil {
		t.Fatal(err)
	}
	e.setCount(sku, cat, 2)

	rec := e.reconciler(reconcile.Options{})
	dry := rec.SKU(ctx, sku, true)
	want := map[string]admin.CountChange{
		ann: {Customer: ann, Old: 0, New: 2}, bob: {Customer: bob, Old: -1, New: 1}, cat: {Customer: cat, Old: 2, New: 1},
	}
	if got := countChanges(dry); len(got) != 3 || got[ann] != want[ann] || got[bob] != want[bob] || got[cat] != want[cat] {
		t.Fatalf("dry run: %+v, want %+v", got, want)
	}
	if e.count(sku, ann) != 0 || e.count(sku, cat) != 2 {
		t.Fatal("a dry run changed the counts")
	}
	rep := rec.SKU(ctx, sku, false)
	if rep.Outcome != admin.SKURepaired || len(countChanges(rep)) != 3 {
		t.Fatalf("repair: %s %+v", rep.Outcome, rep.Repairs)
	}
	for c, n := range map[string]int{ann: 2, bob: 1, cat: 1} {
		if got := e.count(sku, c); got != n {
			t.Errorf("count of %s = %d, want %d", c, got, n)
		}
	}
	if again := rec.SKU(ctx, sku, false); again.Outcome != admin.SKUConsistent {
		t.Fatalf("second run: %s %+v, want consistent", again.Outcome, again.Repairs)
	}
	if _, err := e.st.Reserve(ctx, buyer(sku, ann, 3, 1)); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("ann past the limit after the repair: %v", err)
	}
	if _, err := e.st.Reserve(ctx, buyer(sku, cat, 2, 1)); err != nil {
		t.Fatalf("cat within the limit after the repair: %v", err)
	}
}

func countChanges(r admin.SKUReport) map[string]admin.CountChange {
	out := map[string]admin.CountChange{}
	for _, ch := range r.Repairs {
		for _, c := range ch.CustomerCounts {
			out[c.Customer] = c
		}
	}
	return out
}

// TestRepairLostLimit: a failover lost the load that set the purchase
// limit (Redis has none, MySQL has 2): the reconciler sets it back, and the
// counts of the customers who hold counted units with it.
func TestRepairLostLimit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.limitedProduct(10, 2)
	ann := testenv.Unique("ann-")
	if _, err := e.st.Reserve(ctx, buyer(sku, ann, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(ctx, keys.MaxPerCustomer(sku), keys.CustomerUnits(sku, ann)).Err(); err != nil {
		t.Fatal(err)
	}
	rec := e.reconciler(reconcile.Options{})
	dry := rec.SKU(ctx, sku, true)
	if len(dry.Repairs) != 1 || dry.Repairs[0].MaxPerCustomer == nil || *dry.Repairs[0].MaxPerCustomer != (admin.LimitChange{Old: 0, New: 2}) {
		t.Fatalf("dry run: %+v", dry.Repairs)
	}
	if v, err := e.st.View(ctx, sku); err != nil || v.MaxPerCustomer != 0 {
		t.Fatalf("a dry run set the limit: %d %v", v.MaxPerCustomer, err)
	}
	if rep := rec.SKU(ctx, sku, false); rep.Outcome != admin.SKURepaired {
		t.Fatalf("repair: %s %+v", rep.Outcome, rep.Repairs)
	}
	if v, err := e.st.View(ctx, sku); err != nil || v.MaxPerCustomer != 2 || e.count(sku, ann) != 2 {
		t.Fatalf("after the repair: limit %d count %d (%v), want 2 and 2", v.MaxPerCustomer, e.count(sku, ann), err)
	}
	if _, err := e.st.Reserve(ctx, buyer(sku, ann, 2, 1)); !errors.Is(err, order.ErrPurchaseLimit) {
		t.Fatalf("past the restored limit: %v", err)
	}
}

// TestCountsWaitWhenSoldMoved drives lua/counts.lua directly: when sold
// moved since the reconciler's read (a commit ran, maybe of an order its
// MySQL read missed), it changes no count and answers not aligned; with
// sold unchanged it sets the count.
func TestCountsWaitWhenSoldMoved(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.limitedProduct(10, 3)
	ann := testenv.Unique("ann-")
	if _, err := e.st.Reserve(ctx, buyer(sku, ann, 1, 2)); err != nil {
		t.Fatal(err)
	}
	e.setCount(sku, ann, 0)
	run := func(sold string) []any {
		ks := []string{keys.Resv(sku), keys.MaxPerCustomer(sku), keys.Sold(sku), keys.CustomerUnits(sku, ann)}
		raw, err := lua.Counts.Run(ctx, e.rdb, ks, 1, 0, "0", 3, "3", sold, ann, 0, 0).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if raw := run("1"); raw[3] != int64(0) || e.count(sku, ann) != 0 {
		t.Fatalf("sold moved: reply %v, count %d; want not aligned and the count untouched", raw, e.count(sku, ann))
	}
	if raw := run("0"); raw[3] != int64(1) || e.count(sku, ann) != 2 {
		t.Fatalf("sold unchanged: reply %v, count %d; want aligned and the count 2", raw, e.count(sku, ann))
	}
}

// TestRepublishCarriesTheLimitReservedUnder: orders whose reservations
// outlived the grace are published again with the purchase limit their
// reservations record (0 for one made with no limit; none for one
// recorded before reservations kept their limit), so MySQL judges them as
// their first message would have: the limit lowered since rejects none.
func TestRepublishCarriesTheLimitReservedUnder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.product(10)
	ann, bob, cat := testenv.Unique("ann-"), testenv.Unique("bob-"), testenv.Unique("cat-")
	old := time.Now().Add(-2 * time.Minute)
	free := buyer(sku, bob, 1, 1)
	e.reserveAt(free, old)
	setLimit := func(limit int) {
		t.Helper()
		if _, err := e.db.SetStockWith(ctx, sku, 10, nil, nil, &limit, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.SetStockLimit(ctx, sku, 10, 0, &limit); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(5)
	var anns []order.Order
	for i := range 3 {
		o := buyer(sku, ann, i, 1)
		e.reserveAt(o, old)
		anns = append(anns, o)
	}
	legacy := buyer(sku, cat, 1, 1)
	e.reserveAt(legacy, old)
	v, err := e.rdb.HGet(ctx, keys.Resv(sku), legacy.ID).Result()
	if err != nil || !strings.HasSuffix(v, ":L5") {
		t.Fatalf("reservation under limit 5: %q %v", v, err)
	}
	if err := e.rdb.HSet(ctx, keys.Resv(sku), legacy.ID, strings.TrimSuffix(v, "5")).Err(); err != nil {
		t.Fatal(err)
	}
	setLimit(2)

	pub := &published{}
	if rep := e.reconciler(reconcile.Options{Grace: time.Minute, Publisher: pub}).SKU(ctx, sku, false); rep.Outcome == admin.SKUFailed {
		t.Fatal(rep.Error)
	}
	want := map[string]string{free.ID: "0", legacy.ID: "none"}
	for _, o := range anns {
		want[o.ID] = "5"
	}
	got := map[string]string{}
	for _, o := range pub.orders {
		got[o.ID] = "none"
		if o.MaxPerCustomer != nil {
			got[o.ID] = fmt.Sprint(*o.MaxPerCustomer)
		}
		if res := e.process(o); res.Status != order.StatusInvoiced {
			t.Errorf("republished %s (limit %s): %s %s, want invoiced", o.ID, got[o.ID], res.Status, res.Reason)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("republished with limits %v, want %v", got, want)
	}
}

// sellingLedger sells one unit (MySQL, then Redis's commit) right after
// each MySQL snapshot, as a busy sale would between the reconciler's read
// and its repair: sold moves in every round.
type sellingLedger struct {
	reconcile.Ledger
	e   *env
	sku string
	n   *int
}

func (l sellingLedger) Snapshot(ctx context.Context, sku string, ids []string, lookback time.Duration) (reconcile.Truth, error) {
	t, err := l.Ledger.Snapshot(ctx, sku, ids, lookback)
	*l.n++
	o := buyer(l.sku, fmt.Sprint("busy-", *l.n), *l.n, 1)
	if _, err := l.e.st.Reserve(ctx, o); err != nil {
		l.e.t.Fatal(err)
	}
	l.e.work(o)
	return t, err
}

// TestLimitRealignedWhileSoldMoves: Redis applies another purchase limit
// than MySQL (a load whose reply was lost), and sold moves in every round
// of the reconciler (a busy sale): the counts wait for a round where sold
// stands still, but the limit is set back to MySQL's at once.
func TestLimitRealignedWhileSoldMoves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sku := e.limitedProduct(20, 2)
	e.set(keys.MaxPerCustomer(sku), 5)
	var n int
	rec := reconcile.New(e.rdb, sellingLedger{reconcile.StoreLedger{Store: e.db}, e, sku, &n},
		reconcile.Options{Grace: time.Minute, Attempts: 2, Backoff: time.Millisecond, Log: quiet()})
	rep := rec.SKU(ctx, sku, false)
	if rep.Outcome != admin.SKUBusy {
		t.Fatalf("outcome %s, want busy: sold moved in every round", rep.Outcome)
	}
	if v, err := e.st.View(ctx, sku); err != nil || v.MaxPerCustomer != 2 {
		t.Fatalf("Redis's limit after the reconciler: %d %v, want MySQL's 2", v.MaxPerCustomer, err)
	}
	var changed bool
	for _, r := range rep.Repairs {
		changed = changed || r.MaxPerCustomer != nil && *r.MaxPerCustomer == (admin.LimitChange{Old: 5, New: 2})
	}
	if !changed {
		t.Fatalf("repairs %+v, want the limit reported 5 -> 2", rep.Repairs)
	}
}
