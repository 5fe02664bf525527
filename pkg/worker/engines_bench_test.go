package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/cache"
	"surge/pkg/keys"
	"surge/pkg/lock"
	"surge/pkg/order"
	"surge/pkg/productview"
	"surge/pkg/stock"
	"surge/pkg/store"
	"surge/pkg/worker"
)

// commandCounter counts the commands a Redis client sends, pipelined or not.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// holder takes each order's lock the way the worker did before lock.Group:
// one acquisition and one release call per order.
type holder struct{ c *lock.Client }

func (h holder) Lock(ctx context.Context, _, name string) (int64, context.Context, func(), error) {
	return h.c.Hold(ctx, name, 10*time.Second)
}

// groupHolder takes them the way the worker does: under the SKU's tag,
// together with the other orders' of the SKU.
type groupHolder struct{ g *lock.Group }

func (h groupHolder) Lock(ctx context.Context, sku, name string) (int64, context.Context, func(), error) {
	return h.g.Hold(ctx, keys.SKUTag(sku), name)
}

// delivery is an order handed to the processor without a queue: Ack and
// Retry only count (RabbitMQ's share is measured by make bench).
type delivery struct {
	o        order.Order
	outcomes *sync.Map
}

func (d delivery) Order() (order.Order, error) { return d.o, nil }
func (d delivery) Ack() error                  { d.outcomes.Store(d.o.ID, "ack"); return nil }
func (d delivery) Retry(err error) error       { d.outcomes.Store(d.o.ID, "retry: "+err.Error()); return nil }
func (d delivery) Dead(r string, err error) error {
	d.outcomes.Store(d.o.ID, "dead: "+r)
	return nil
}

// BenchmarkHandleOnEngines runs the worker's handling of reserved orders
// of one SKU on the real engines, 256 at a time as the worker's handlers
// do: lock, batched MySQL transaction, Redis settle, product view. It
// reports the wall time per order (ns/op: the inverse of the rate), the
// worker's own CPU per order (the benchmark process's, the engines'
// excluded) and the Redis commands it sent per order. settle=per-order
// commits each order by its own script call, settle=per-sku through
// stock.Committer; locks=per-order takes and releases each order's lock
// by its own calls, locks=per-sku through lock.Group (the worker's way).
func BenchmarkHandleOnEngines(b *testing.B) {
	for _, c := range []struct {
		name           string
		batched, group bool
	}{
		{"settle=per-order/locks=per-order", false, false},
		{"settle=per-sku/locks=per-order", true, false},
		{"settle=per-sku/locks=per-sku", true, true},
	} {
		b.Run(c.name, func(b *testing.B) { benchHandle(b, c.batched, c.group) })
	}
}

func benchHandle(b *testing.B, batched, group bool) {
	ctx := context.Background()
	db, _ := testkit.Store(b)
	rdb := testenv.Redis(b)
	sku := testkit.StockSKU(b, db, rdb, "bench-h-", 100_000_000, testkit.Product{Name: "kettle", PriceCents: 100})
	gate := stock.New(rdb, stock.Options{})
	wrdb := testenv.Redis(b)
	counter := &commandCounter{}
	wrdb.AddHook(counter)
	batcher := store.NewBatcher(db, store.BatcherOptions{})
	b.Cleanup(batcher.Close)
	var settler worker.Settler = stock.New(wrdb, stock.Options{})
	if batched {
		settler = stock.NewCommitter(stock.New(wrdb, stock.Options{}), stock.CommitterOptions{})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
	views := productview.New(wrdb, db, cache.Options{}, log)
	b.Cleanup(views.Close)
	var locker worker.Locker = holder{lock.New(wrdb, lock.Options{})}
	if group {
		locker = groupHolder{lock.NewGroup(lock.New(wrdb, lock.Options{}), lock.GroupOptions{})}
	}
	p := worker.New(worker.Processor{Ledger: batcher, Stock: settler, Lock: locker, Cache: views, Log: log})

	b.StopTimer()
	orders := make([]order.Order, b.N)
	run := fmt.Sprint(time.Now().UnixNano())
	parallel(len(orders), func(i int) {
		orders[i] = order.Order{ID: order.IDFor("c", fmt.Sprint(run, i), 0), SKU: sku, Qty: 1, CustomerID: "c"}
		if _, err := gate.Reserve(ctx, orders[i]); err != nil {
			b.Error(err)
		}
	})
	outcomes := &sync.Map{}
	before, cpu := counter.n.Load(), cpuTime(b)
	b.StartTimer()
	parallel(len(orders), func(i int) { p.Handle(ctx, delivery{o: orders[i], outcomes: outcomes}) })
	b.StopTimer()
	b.ReportMetric(float64(counter.n.Load()-before)/float64(b.N), "redis_cmds/op")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "worker_cpu_us/op")
	for _, o := range orders {
		if v, _ := outcomes.Load(o.ID); v != "ack" {
			b.Fatalf("order %s: %v, want ack", o.ID, v)
		}
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallel runs fn(0..n-1) on 256 goroutines.
func parallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}
