package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// waitStock returns a Stock with WaitReplicas n on a fresh SKU of total
// units.
func waitStock(tb testing.TB, n, total int) (*stock.Stock, string) {
	tb.Helper()
	rdb := testenv.Redis(tb)
	if err := stock.LoadScripts(context.Background(), rdb); err != nil {
		tb.Fatal(err)
	}
	sku := testenv.Unique("stk-wait-")
	testenv.CleanupSKU(tb, rdb, sku)
	s := stock.New(rdb, stock.Options{WaitReplicas: n, WaitTimeout: 100 * time.Millisecond})
	if _, err := s.SetStock(context.Background(), sku, total, 0); err != nil {
		tb.Fatal(err)
	}
	return s, sku
}

func TestReserveWaitsForTheReplica(t *testing.T) {
	ctx := context.Background()
	s, sku := waitStock(t, 1, 5) // every master of the local cluster has one replica
	o := ord(sku, 1, 2)
	if r, err := s.Reserve(ctx, o); err != nil || r.Avail != 3 {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if r, err := s.Reserve(ctx, o); err != nil || !r.Repeat {
		t.Fatalf("repeat: %+v %v, want repeat", r, err)
	}
	if v := mustView(t, s, sku); v.Avail != 3 || v.Reserved != 2 {
		t.Errorf("view %+v, want 2 reserved", v)
	}
}

// TestReserveUndoesWhatReplicasMissed asks for more replicas than the
// cluster has: WAIT times out, Reserve fails, and the caller's Undo with
// the nonce Reserve returned gives the units back. The undo itself waits
// for as many replicas, and none is enough: a failover could bring back
// the reservation without the undo, so Undo says the undo is not durable
// (the gateway answers outcome unknown, never "not taken").
func TestReserveUndoesWhatReplicasMissed(t *testing.T) {
	ctx := context.Background()
	s, sku := waitStock(t, 2, 5)
	r, err := s.Reserve(ctx, ord(sku, 1, 2))
	if !errors.Is(err, stock.ErrNotReplicated) {
		t.Fatalf("reserve: %v, want not replicated", err)
	}
	n, err := s.Undo(ctx, sku, ord(sku, 1, 2).ID, r.Nonce)
	if !errors.Is(err, stock.ErrNotReplicated) || n != 2 {
		t.Fatalf("undo: %d %v, want 2 released on the master, not replicated", n, err)
	}
	if v := mustView(t, s, sku); v.Avail != 5 || v.Reserved != 0 {
		t.Errorf("view %+v, want the units back", v)
	}
	if st, _ := s.State(ctx, sku, ord(sku, 1, 2).ID); st != "U" {
		t.Errorf("order state %q, want U (undone: a new claim reserves anew)", st)
	}
}

// BenchmarkReserve measures the cost of waiting for the replica: compare
// wait=0 (the default) with wait=1. A reservation the replica did not
// acknowledge in time is counted in refused/op, not failed: on a loaded
// machine that is the option's other cost.
func BenchmarkReserve(b *testing.B) {
	for _, n := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", n), func(b *testing.B) {
			s, sku := waitStock(b, n, order.MaxStock)
			var seq, refused atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, err := s.Reserve(context.Background(), ord(sku, int(seq.Add(1)), 1))
					switch {
					case errors.Is(err, stock.ErrNotReplicated):
						refused.Add(1)
					case err != nil:
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
		})
	}
}
