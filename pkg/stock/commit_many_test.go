package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// commitFixture reserves a (2 units) and b (1) on a SKU of 10 and commits
// b; c (1) has no reservation (a failover lost it with the SKU's state).
func commitFixture(t *testing.T) (*stock.Stock, string, []stock.CommitItem) {
	t.Helper()
	ctx := context.Background()
	s, sku := setup(t, 10)
	a, b, c := ord(sku, 1, 2), ord(sku, 2, 1), ord(sku, 3, 1)
	for _, o := range []order.Order{a, b} {
		if _, err := s.Reserve(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, sku, b.ID, b.Qty); err != nil {
		t.Fatal(err)
	}
	item := func(o order.Order) stock.CommitItem { return stock.CommitItem{OrderID: o.ID, Qty: o.Qty} }
	return s, sku, []stock.CommitItem{item(a), item(b), item(c), item(a)}
}

// counts is a view without its reservation times, which differ between SKUs.
func counts(v stock.View) [4]int { return [4]int{v.Avail, v.Reserved, v.Sold, v.Stock} }

// CommitMany settles a batch exactly as Commit settles its orders in turn:
// from the reservation, already committed, from avail, and a repeat of an
// order within the batch as already committed.
func TestCommitManyMatchesCommitInTurn(t *testing.T) {
	ctx := context.Background()
	one, skuOne, items := commitFixture(t)
	var want []order.CommitOutcome
	for _, it := range items {
		out, err := one.Commit(ctx, skuOne, it.OrderID, it.Qty)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, out)
	}
	many, skuMany, items := commitFixture(t)
	got, err := many.CommitMany(ctx, skuMany, items)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]order.CommitOutcome{order.CommittedFromResv, order.CommittedAlready, order.CommittedFromAvail, order.CommittedAlready}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("CommitMany vs Commit in turn (-turn +many):\n%s", diff)
	}
	if a, b := counts(mustView(t, one, skuOne)), counts(mustView(t, many, skuMany)); a != b || b != [4]int{6, 0, 4, 10} {
		t.Fatalf("views: in turn %v, batch %v, want both [6 0 4 10]", a, b)
	}
	again, err := many.CommitMany(ctx, skuMany, items)
	if err != nil || !cmp.Equal(again, []order.CommitOutcome{0, 0, 0, 0}) {
		t.Fatalf("the same batch again: %v %v, want all already committed", again, err)
	}
	if v := counts(mustView(t, many, skuMany)); v != [4]int{6, 0, 4, 10} {
		t.Fatalf("view after the repeated batch %v, want unchanged", v)
	}
}

// A batch for a SKU that is not loaded fails whole and writes nothing.
func TestCommitManyNotLoadedChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, -1)
	items := []stock.CommitItem{{OrderID: ord(sku, 1, 1).ID, Qty: 1}, {OrderID: ord(sku, 2, 1).ID, Qty: 2}}
	if _, err := s.CommitMany(ctx, sku, items); !errors.Is(err, order.ErrNotLoaded) {
		t.Fatalf("commit many: %v, want not loaded", err)
	}
	rdb := testenv.Redis(t)
	for _, it := range items {
		if n := rdb.Exists(ctx, keys.OrderState(sku, it.OrderID)).Val(); n != 0 {
			t.Fatalf("order %s has a state after a refused batch", it.OrderID)
		}
	}
	if n := rdb.Exists(ctx, keys.Sold(sku), keys.Avail(sku)).Val(); n != 0 {
		t.Fatalf("%d stock keys written by a refused batch", n)
	}
}

func TestCommitManyRefusesBadQty(t *testing.T) {
	s, sku := setup(t, 5)
	_, err := s.CommitMany(context.Background(), sku, []stock.CommitItem{{OrderID: ord(sku, 1, 1).ID, Qty: 0}})
	if !errors.Is(err, order.ErrInvalid) {
		t.Fatalf("qty 0: %v, want invalid", err)
	}
	if v := counts(mustView(t, s, sku)); v != [4]int{5, 0, 0, 5} {
		t.Fatalf("view %v after a refused batch", v)
	}
}

// 400 orders reserved, each committed by two racing callers through one
// Committer: every order is committed from its reservation exactly once,
// the other call sees it committed, and the SKU ends with all 400 sold.
func TestCommitterConcurrentCommitsSettleEachOrderOnce(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 400)
	orders := make([]order.Order, 400)
	for i := range orders {
		orders[i] = ord(sku, i, 1)
		if _, err := s.Reserve(ctx, orders[i]); err != nil {
			t.Fatal(err)
		}
	}
	c := stock.NewCommitter(s, stock.CommitterOptions{MaxBatch: 64})
	outs := make([][2]order.CommitOutcome, len(orders))
	errs := make(chan error, 2*len(orders))
	var wg sync.WaitGroup
	for i, o := range orders {
		for k := range 2 {
			wg.Go(func() {
				out, err := c.Commit(ctx, sku, o.ID, o.Qty)
				if err != nil {
					errs <- err
				}
				outs[i][k] = out
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, o := range outs {
		if o[0]+o[1] != order.CommittedFromResv || (o[0] != 0 && o[1] != 0) {
			t.Fatalf("order %d: outcomes %v, want one from the reservation and one already committed", i, o)
		}
	}
	if v := counts(mustView(t, s, sku)); v != [4]int{0, 0, 400, 400} {
		t.Fatalf("view %v, want all 400 sold", v)
	}
}
