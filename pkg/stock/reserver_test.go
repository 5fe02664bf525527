package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/lua"
	"surge/pkg/order"
	"surge/pkg/stock"
)

// gatedScripts counts the reserve_many calls and, while closed, holds
// them before they leave (a call in flight that has not reached Redis).
type gatedScripts struct {
	stock.Client
	calls atomic.Int64
	mu    sync.Mutex
	gate  chan struct{}
}

func newGated(c stock.Client) *gatedScripts {
	g := &gatedScripts{Client: c, gate: make(chan struct{})}
	close(g.gate)
	return g
}

func (g *gatedScripts) hold() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedScripts) open() {
	g.mu.Lock()
	close(g.gate)
	g.mu.Unlock()
}

func (g *gatedScripts) EvalSha(ctx context.Context, sha string, ks []string, args ...any) *redis.Cmd {
	if sha == lua.ReserveMany.Hash() {
		g.calls.Add(1)
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		<-gate
	}
	return g.Client.EvalSha(ctx, sha, ks, args...)
}

// The Reserver sells exactly what Reserve sells: 500 buyers at once for
// 100 units get 100 reservations and 400 sold-out answers, Redis stays
// consistent, and the reserves went in far fewer script calls than
// orders.
func TestReserverSellsExactlyTheStock(t *testing.T) {
	s, sku := setup(t, 100)
	gated := newGated(testenv.Redis(t))
	r := stock.NewReserver(stock.New(gated, stock.Options{}), stock.ReserverOptions{})
	ctx := context.Background()
	const n = 500
	var reserved, soldOut atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			o := order.Order{ID: order.IDFor(fmt.Sprint("c", i), "k", 0), SKU: sku, Qty: 1, CustomerID: fmt.Sprint("c", i)}
			res, err := r.Reserve(ctx, o)
			switch {
			case err == nil && !res.Repeat:
				reserved.Add(1)
			case errors.Is(err, order.ErrSoldOut):
				soldOut.Add(1)
			default:
				t.Errorf("order %d: %+v %v", i, res, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if reserved.Load() != 100 || soldOut.Load() != n-100 {
		t.Fatalf("%d reserved, %d sold out, want 100 and %d", reserved.Load(), soldOut.Load(), n-100)
	}
	if v := mustView(t, s, sku); v.Avail != 0 || v.Reserved != 100 {
		t.Fatalf("after the sale: avail %d, reserved %d, want 0 and 100", v.Avail, v.Reserved)
	}
	if calls := gated.calls.Load(); calls > n/4 {
		t.Fatalf("%d script calls for %d reserves of one SKU, want them batched (at most %d)", calls, n, n/4)
	}
}

// One customer's 64 orders at once against a limit of 3, all in batches:
// exactly 3 reserved, the others refused for the limit, and the same order
// sent twice in one batch (a retry racing its first request) reserves once.
func TestReserverKeepsTheLimitAndOneReservationPerOrder(t *testing.T) {
	s, sku := limited(t, 100, 3)
	r := stock.NewReserver(s, stock.ReserverOptions{})
	ctx := context.Background()
	var ok, limit atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 64 {
		wg.Go(func() {
			<-start
			res, err := r.Reserve(ctx, custOrder(sku, "ann", i, 1))
			switch {
			case err == nil && !res.Repeat:
				ok.Add(1)
			case errors.Is(err, order.ErrPurchaseLimit):
				limit.Add(1)
			default:
				t.Errorf("order %d: %+v %v", i, res, err)
			}
		})
	}
	twin := custOrder(sku, "bob", 1, 2)
	var twins [2]order.Reservation
	for i := range twins {
		wg.Go(func() {
			<-start
			res, err := r.Reserve(ctx, twin)
			if err != nil {
				t.Errorf("twin %d: %v", i, err)
			}
			twins[i] = res
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != 3 || limit.Load() != 61 {
		t.Fatalf("%d reserved and %d refused for the limit, want 3 and 61", ok.Load(), limit.Load())
	}
	if units(t, sku, "ann") != 3 {
		t.Fatalf("ann's count %d, want 3", units(t, sku, "ann"))
	}
	if twins[0].Repeat == twins[1].Repeat {
		t.Fatalf("the same order twice: %+v, want one reservation and one repeat", twins)
	}
	if v := mustView(t, s, sku); v.Reserved != 5 {
		t.Fatalf("reserved %d units, want 5 (ann 3, bob 2)", v.Reserved)
	}
}

// A caller that gives up while its order waits behind a call in flight
// gets its nonce, as after a Reserve that timed out; its Undo marks the
// order, and when the batch holding it reaches Redis later, it reserves
// nothing for it. The other orders of the batch are reserved.
func TestReserverCallerThatGaveUpIsUndone(t *testing.T) {
	s, sku := setup(t, 10)
	gated := newGated(testenv.Redis(t))
	r := stock.NewReserver(stock.New(gated, stock.Options{}), stock.ReserverOptions{})
	ctx := context.Background()
	gated.hold()
	first := make(chan error, 1)
	go func() {
		_, err := r.Reserve(ctx, order.Order{ID: order.IDFor("first", "k", 0), SKU: sku, Qty: 1, CustomerID: "first"})
		first <- err
	}()
	for gated.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	other := make(chan error, 1)
	go func() {
		_, err := r.Reserve(ctx, order.Order{ID: order.IDFor("other", "k", 0), SKU: sku, Qty: 1, CustomerID: "other"})
		other <- err
	}()
	quitter := order.Order{ID: order.IDFor("quitter", "k", 0), SKU: sku, Qty: 2, CustomerID: "quitter"}
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	res, err := r.Reserve(qctx, quitter)
	if !errors.Is(err, context.DeadlineExceeded) || res.Nonce == "" {
		t.Fatalf("reserve of a caller that gave up: %+v %v, want its nonce and the deadline", res, err)
	}
	if _, err := s.Undo(ctx, sku, quitter.ID, res.Nonce); err != nil {
		t.Fatal(err)
	}
	gated.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	// The batch that held the quitter has run once other answered.
	v := mustView(t, s, sku)
	if v.Reserved != 2 || v.Avail != 8 {
		t.Fatalf("reserved %d, avail %d (%v), want the two orders that waited and nothing for the one undone", v.Reserved, v.Avail, v.Reservations)
	}
	if _, held := v.Reservations[quitter.ID]; held {
		t.Fatalf("the order undone holds a reservation: %v", v.Reservations)
	}
}
