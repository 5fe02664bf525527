package gateway

import (
	"context"
	"strconv"
	"testing"

	"surge/pkg/order"
)

// BenchmarkSoldOutPath: the bulk of a flash sale, new orders for a SKU
// that stays sold out, each from a new customer, from 64 goroutines at
// once. It reports the claims and reserve scripts per request (writes:
// 0 wanted) and the reads of the SKU per thousand requests (one per round
// trip, shared by the requests that wait for it).
func BenchmarkSoldOutPath(b *testing.B) {
	st, claims := newFakeStock(0), newFakeClaims()
	s := New(Service{Stock: st, Idem: claims, Queue: &fakeQueue{}, Catalog: knownSKUs{}, SoldOut: newSoldOut(st)})
	s.SoldOut.Observe("tee", 0)
	ctx := context.Background()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			o := order.Order{SKU: "tee", Qty: 1, CustomerID: "c" + strconv.Itoa(i)}
			if s.RefuseSoldOut(ctx, o, "k") == nil {
				_, _ = s.Accept(ctx, o, "k")
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(len(claims.records)+st.reserves)/float64(b.N), "writes/op")
	b.ReportMetric(float64(st.sights)*1e3/float64(b.N), "reads/1k")
}
