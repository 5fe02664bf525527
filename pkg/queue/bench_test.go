package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/order"
)

// BenchmarkPublishConfirmed measures confirmed, persistent publishes to a
// quorum queue from many goroutines sharing the default channel pool.
func BenchmarkPublishConfirmed(b *testing.B) {
	conn := dialTest(b, testenv.AMQPURL(b))
	topo := testTopology(b, conn)
	pub := newTestPublisher(b, conn, topo, PublisherOptions{})
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			o := order.Order{ID: order.IDFor("bench", fmt.Sprint(i), 0), SKU: "sku-1", Qty: 1, CustomerID: "bench"}
			if err := pub.Publish(context.Background(), o); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
