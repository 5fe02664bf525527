package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// env is one test's engines: the shared cluster and a fresh database.
type env struct {
	t   *testing.T
	rdb *redis.ClusterClient
	st  *stock.Stock
	db  *store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	db, _ := testkit.Store(t)
	return &env{t: t, rdb: rdb, st: stock.New(rdb, stock.Options{}), db: db}
}

// product creates a SKU with total units in MySQL and Redis.
func (e *env) product(total int) string {
	e.t.Helper()
	sku := testkit.StockSKU(e.t, e.db, e.rdb, "rec-", total, testkit.Product{Name: "Flash item", PriceCents: 1000})
	return sku
}

func (e *env) reconciler(opts reconcile.Options) *reconcile.Reconciler {
	if opts.Grace == 0 {
		opts.Grace = time.Minute
	}
	opts.Log = quiet()
	return reconcile.New(e.rdb, reconcile.StoreLedger{Store: e.db}, opts)
}

func ord(sku string, n, qty int) order.Order {
	return order.Order{ID: order.IDFor("c-"+sku, fmt.Sprint(n), 0), SKU: sku, Qty: qty, CustomerID: "c-" + sku}
}

// reserveAt reserves o, then sets the reservation's time (the master's
// clock when it was made) to at.
func (e *env) reserveAt(o order.Order, at time.Time) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.st.Reserve(ctx, o); err != nil {
		e.t.Fatalf("reserve %s: %v", o.ID, err)
	}
	v, err := e.rdb.HGet(ctx, keys.Resv(o.SKU), o.ID).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	f := strings.SplitN(v, ":", 3)
	f[1] = strconv.FormatInt(at.UnixMilli(), 10)
	if err := e.rdb.HSet(ctx, keys.Resv(o.SKU), o.ID, strings.Join(f, ":")).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// published records the orders a reconciler publishes again.
type published struct {
	mu     sync.Mutex
	orders []order.Order
	err    error
}

func (p *published) Publish(_ context.Context, o order.Order) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.orders = append(p.orders, o)
	return nil
}

func (p *published) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, o := range p.orders {
		out = append(out, o.ID)
	}
	return out
}

// process runs MySQL's side of a worker, leaving Redis alone (as when the
// Redis step was lost).
func (e *env) process(o order.Order) order.Processed {
	e.t.Helper()
	res, err := e.db.Process(context.Background(), o, 0)
	if err != nil {
		e.t.Fatalf("process %s: %v", o.ID, err)
	}
	return res
}

// work runs a whole worker step: MySQL, then the matching Redis script.
func (e *env) work(o order.Order) order.Processed {
	e.t.Helper()
	res := e.process(o)
	var err error
	if res.Status == order.StatusInvoiced {
		_, err = e.st.Commit(context.Background(), o.SKU, o.ID, o.Qty)
	} else {
		_, err = e.st.Release(context.Background(), o.SKU, o.ID, order.ReleaseRejected)
	}
	if err != nil {
		e.t.Fatalf("settle %s: %v", o.ID, err)
	}
	return res
}

func (e *env) set(key string, v any) {
	e.t.Helper()
	if err := e.rdb.Set(context.Background(), key, v, 0).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// state is a SKU's whole Redis state as the tests compare it.
type state struct {
	Loaded                       bool
	Stock, Avail, Sold, Reserved int
	Reservations                 []string
	States                       map[string]string
}

// state reads sku's keys and the states of the given orders.
func (e *env) state(sku string, orders ...order.Order) state {
	e.t.Helper()
	ctx := context.Background()
	v, err := e.st.View(ctx, sku)
	if err != nil {
		e.t.Fatal(err)
	}
	s := state{Loaded: v.Loaded, Stock: v.Stock, Avail: v.Avail, Sold: v.Sold, Reserved: v.Reserved,
		States: map[string]string{}}
	for id := range v.Reservations {
		s.Reservations = append(s.Reservations, id)
	}
	sort.Strings(s.Reservations)
	for _, o := range orders {
		st, err := e.st.State(ctx, sku, o.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		s.States[o.ID] = st
	}
	return s
}

// mysqlSold reads products.sold.
func (e *env) mysqlSold(sku string) int {
	e.t.Helper()
	p, err := e.db.Product(context.Background(), sku)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Sold
}

// repairs counts sku's rows in reconcile_repairs, by dry_run.
func (e *env) repairs(sku string, dryRun bool) int {
	e.t.Helper()
	var n int
	err := e.db.DB().Get(&n, "SELECT COUNT(*) FROM reconcile_repairs WHERE sku = ? AND dry_run = ?", sku, dryRun)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func ids(os ...order.Order) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.ID
	}
	sort.Strings(out)
	return out
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
