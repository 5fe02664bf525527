package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
	"surge/pkg/lock"
	"surge/pkg/order"
	"surge/pkg/stock"
	"surge/pkg/worker"
)

// gatedLedger holds the first Process call until open is closed, and
// records how many calls for the order ever ran at once.
type gatedLedger struct {
	worker.Ledger
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
	inside  atomic.Int32
	most    atomic.Int32
}

func (g *gatedLedger) Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error) {
	n := g.inside.Add(1)
	defer g.inside.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.open
	}
	return g.Ledger.Process(ctx, o, fence)
}

// delivery is one delivery of an order, recording how it was settled.
type delivery struct {
	o       order.Order
	settled chan string
	cause   error
}

func newDelivery(o order.Order) *delivery { return &delivery{o: o, settled: make(chan string, 1)} }

func (d *delivery) Order() (order.Order, error) { return d.o, nil }
func (d *delivery) Ack() error                  { d.settled <- "ack"; return nil }
func (d *delivery) Retry(cause error) error     { d.cause = cause; d.settled <- "retry"; return nil }
func (d *delivery) Dead(reason string, cause error) error {
	d.cause = cause
	d.settled <- "dead:" + reason
	return nil
}

// A redelivery of an order whose first delivery is still in its MySQL
// transaction waits for the order's lock, gives up after the bounded wait
// and is retried through the tiers: the transaction never runs twice at
// once. A later redelivery gets the lock and finds the order done.
func TestRedeliveryWaitsForTheOrderLock(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	db, _ := testkit.Store(t)
	sku := testkit.StockSKU(t, db, rdb, "lock-", 5, testkit.Product{})
	st := stock.New(rdb, stock.Options{})
	o := order.Order{ID: testenv.Unique("o-"), SKU: sku, Qty: 2, CustomerID: "c-lock"}
	if _, err := st.Reserve(ctx, o); err != nil {
		t.Fatal(err)
	}

	ledger := &gatedLedger{Ledger: db, entered: make(chan struct{}), open: make(chan struct{})}
	locker := newOrderLocker(rdb, 0)
	t.Cleanup(func() { cleanupLock(rdb, sku, worker.LockName(o.ID)) })
	proc := worker.New(worker.Processor{Ledger: ledger, Stock: st, Lock: locker,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})

	first := newDelivery(o)
	go proc.Handle(ctx, first)
	<-ledger.entered

	second := newDelivery(o)
	proc.Handle(ctx, second)
	if got := <-second.settled; got != "retry" || !errors.Is(second.cause, lock.ErrNotObtained) {
		t.Fatalf("redelivery during the first: %s (%v), want retry on a busy lock", got, second.cause)
	}

	close(ledger.open)
	if got := <-first.settled; got != "ack" {
		t.Fatalf("first delivery: %s (%v), want ack", got, first.cause)
	}
	third := newDelivery(o)
	proc.Handle(ctx, third)
	if got := <-third.settled; got != "ack" {
		t.Fatalf("later redelivery: %s (%v), want ack", got, third.cause)
	}
	if most := ledger.most.Load(); most != 1 {
		t.Fatalf("%d transactions of the order ran at once, want 1", most)
	}
	if n, err := db.InvoiceCount(ctx, sku); err != nil || n != 1 {
		t.Fatalf("invoices %d (%v), want 1", n, err)
	}
	rec, err := db.Order(ctx, o.ID)
	if err != nil || rec.Status != string(order.StatusInvoiced) {
		t.Fatalf("order %+v (%v), want invoiced", rec, err)
	}
}

func cleanupLock(rdb interface {
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}, sku, name string) {
	rdb.Del(context.Background(), keys.TaggedLock(keys.SKUTag(sku), name), keys.TagFence(keys.SKUTag(sku)))
}
