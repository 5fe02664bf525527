package stock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// BenchmarkReserveOnEngines reserves b.N orders of one SKU, 256 at a time
// as a busy gateway does, on the real cluster through go-redis's
// autopipeliner (the gateway's client): calls=per-order sends each by its
// own script call (Stock), calls=per-sku through stock.Reserver. It
// reports the CPU the whole cluster spent per order (masters and
// replicas, from each node's INFO cpu) and this process's (the gateway's
// side).
func BenchmarkReserveOnEngines(b *testing.B) {
	for _, batched := range []bool{false, true} {
		name := "calls=per-order"
		if batched {
			name = "calls=per-sku"
		}
		b.Run(name, func(b *testing.B) { benchReserve(b, batched) })
	}
}

type reserveFunc func(context.Context, order.Order) (order.Reservation, error)

func benchReserve(b *testing.B, batched bool) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	sku := testenv.Unique("bench-rsv-")
	testenv.CleanupSKU(b, rdb, sku)
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		b.Fatal(err)
	}
	if _, err := stock.New(rdb, stock.Options{}).SetStock(ctx, sku, b.N, 0); err != nil {
		b.Fatal(err)
	}
	ap, err := rdb.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ap.Close() })
	s := stock.New(ap, stock.Options{StateTTL: time.Minute})
	reserve := reserveFunc(s.Reserve)
	if batched {
		reserve = stock.NewReserver(s, stock.ReserverOptions{}).Reserve
	}
	run := fmt.Sprint(time.Now().UnixNano())
	var next atomic.Int64
	var wg sync.WaitGroup
	redisCPU, ownCPU := clusterCPU(b, rdb), processCPU(b)
	b.ResetTimer()
	for range 256 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
				c := fmt.Sprint("c", run, i)
				if _, err := reserve(ctx, order.Order{ID: order.IDFor(c, "k", 0), SKU: sku, Qty: 1, CustomerID: c}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((clusterCPU(b, rdb)-redisCPU).Microseconds())/float64(b.N), "redis_cpu_us/op")
	b.ReportMetric(float64((processCPU(b)-ownCPU).Microseconds())/float64(b.N), "client_cpu_us/op")
}

// clusterCPU sums used_cpu_sys and used_cpu_user over every node.
func clusterCPU(b *testing.B, rdb *redis.ClusterClient) time.Duration {
	var mu sync.Mutex
	var total float64
	each := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return err
				}
				mu.Lock()
				total += f
				mu.Unlock()
			}
		}
		return nil
	}
	ctx := context.Background()
	if err := rdb.ForEachMaster(ctx, each); err != nil {
		b.Fatal(err)
	}
	if err := rdb.ForEachSlave(ctx, each); err != nil {
		b.Fatal(err)
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
