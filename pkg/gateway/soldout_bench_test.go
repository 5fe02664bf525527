package gateway

import (
	"context"
	"strconv"
	"testing"
	"time"

	"surge/pkg/order"
)

// countedClaims and countedStock count the Redis calls the sold-out path
// makes: the claim (one admit script), the mark dropped before a probe
// reserves, and the reserve script on the SKU's hot master.
type countedClaims struct {
	*fakeClaims
	claims, unmarks int
}

func (c *countedClaims) Claim(ctx context.Context, o order.Order, key string, soldOut bool) (order.Claim, error) {
	c.claims++
	return c.fakeClaims.Claim(ctx, o, key, soldOut)
}

func (c *countedClaims) Unmark(ctx context.Context, cl order.Claim) (bool, error) {
	c.unmarks++
	return c.fakeClaims.Unmark(ctx, cl)
}

type countedStock struct {
	*fakeStock
	reserves int
}

func (s *countedStock) Reserve(ctx context.Context, o order.Order) (order.Reservation, error) {
	s.reserves++
	return s.fakeStock.Reserve(ctx, o)
}

// BenchmarkSoldOutPath: the bulk of a flash sale, new orders for a SKU
// that stays sold out, one every 10 µs of the service's clock (100,000 a
// second) with the default 100 ms hint; in "refused", every other request
// comes from a client over its budget. It reports the Redis calls per
// request (calls/op), those beyond the claim per million requests, and
// the reservations on the SKU's master per million requests.
func BenchmarkSoldOutPath(b *testing.B) {
	for _, refused := range []bool{false, true} {
		name := "admitted"
		if refused {
			name = "refused"
		}
		b.Run(name, func(b *testing.B) {
			claims := &countedClaims{fakeClaims: newFakeClaims()}
			claims.limited["bot"] = true
			st := &countedStock{fakeStock: newFakeStock(0)}
			s := New(Service{Stock: st, Idem: claims, Queue: &fakeQueue{}, Catalog: knownSKUs{},
				SoldOut: &SoldOutHints{TTL: 100 * time.Millisecond}})
			now := time.Unix(1_700_000_000, 0)
			s.Now = func() time.Time { return now }
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				now = now.Add(10 * time.Microsecond)
				customer := "c" + strconv.Itoa(i)
				if refused && i%2 == 1 {
					customer = "bot"
				}
				_, _ = s.Accept(ctx, order.Order{SKU: "tee", Qty: 1, CustomerID: customer}, "k")
			}
			calls := claims.claims + claims.unmarks + st.reserves
			b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
			b.ReportMetric(float64(calls-b.N)*1e6/float64(b.N), "calls-beyond-one/1M")
			b.ReportMetric(float64(st.reserves)*1e6/float64(b.N), "reserves/1M")
		})
	}
}
