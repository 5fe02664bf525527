package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"surge/pkg/order"
)

// BenchmarkProcess measures one transaction per order on one hot SKU with
// 50 concurrent workers (the worker pool's default).
func BenchmarkProcess(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	seed(b, s, "hot", order.MaxStock, 100)
	var n atomic.Int64
	b.SetParallelism(25) // 25 x GOMAXPROCS(2) = 50 workers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("o-%d", n.Add(1))
			if _, err := s.Process(ctx, ord(id, "hot", 1), 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkProcessBatch measures batched transactions on one hot SKU from
// a few concurrent workers; rows/s counts orders written.
func BenchmarkProcessBatch(b *testing.B) {
	for _, size := range []int{100, 500} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			seed(b, s, "hot", order.MaxStock, 100)
			var n atomic.Int64
			b.SetParallelism(2) // 4 workers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				items := make([]BatchItem, size)
				for pb.Next() {
					for i := range items {
						items[i] = item(fmt.Sprintf("o-%d", n.Add(1)), "hot", 1, 1)
					}
					if _, err := s.ProcessBatch(ctx, items); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
