package stock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"surge/lua"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// ReserveItem is one order of a ReserveMany call.
type ReserveItem struct {
	Order order.Order
	// Nonce is the reserving call's own (order.Nonce): Undo takes back
	// only what the call with this nonce reserved.
	Nonce string
	// Retry is true for a request whose idempotency claim found its record
	// (ReserveRetry), false for a new one (Reserve).
	Retry bool
}

// ReserveMany reserves for several orders of one SKU in one script call
// (lua/reserve_many.lua), each exactly as Reserve or ReserveRetry would
// alone, in order. It returns each order's results as those calls do,
// and an error only when the call itself failed (then any of the orders
// may have been reserved: each is undone by its nonce, as after a failed
// Reserve).
func (s *Stock) ReserveMany(ctx context.Context, sku string, items []ReserveItem) ([]order.Reservation, []error, error) {
	ks := make([]string, 3, 3+3*len(items))
	ks[0], ks[1], ks[2] = keys.Avail(sku), keys.Resv(sku), keys.MaxPerCustomer(sku)
	args := make([]any, 1, 1+5*len(items))
	args[0] = s.ttl
	for _, it := range items {
		o := it.Order
		if o.SKU != sku {
			return nil, nil, fmt.Errorf("reserve sku=%s: order %s is for sku %s", sku, o.ID, o.SKU)
		}
		newClaim := "1"
		if it.Retry {
			newClaim = "0"
		}
		ks = append(ks, keys.OrderState(sku, o.ID), keys.Undone(sku, o.ID), keys.CustomerUnits(sku, o.CustomerID))
		args = append(args, o.ID, o.Qty, it.Nonce, o.CustomerID, newClaim)
	}
	res, err := lua.ReserveMany.Run(ctx, s.rdb, ks, args...).Int64Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("reserve sku=%s (%d orders): %w", sku, len(items), err)
	}
	if len(res) != 2*len(items) {
		return nil, nil, fmt.Errorf("reserve sku=%s: %d values for %d orders", sku, len(res), len(items))
	}
	out, errs := make([]order.Reservation, len(items)), make([]error, len(items))
	for i, it := range items {
		out[i], errs[i] = reserved(it.Order, order.Reservation{Nonce: it.Nonce}, res[2*i], res[2*i+1])
	}
	return out, errs, nil
}

// ReserverOptions tunes a Reserver. The zero value means the defaults.
type ReserverOptions struct {
	// MaxBatch caps the orders of one ReserveMany call. Default 128.
	MaxBatch int
	// Timeout bounds a ReserveMany call whose callers have no deadline;
	// otherwise the call ends with the latest of theirs. Default 5s.
	Timeout time.Duration
}

func (o *ReserverOptions) setDefaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
}

// Reserver reserves a SKU's orders per batch: the Reserve and ReserveRetry
// calls for one SKU that arrive while a call for it is in flight go
// together in its next ReserveMany call. A SKU with no call in flight
// sends at once, so a reservation waits for at most one call ahead of its
// own, and a busy SKU costs one script call per round trip instead of one
// per order. It has Reserve's contract, including after a failure: the
// Reservation carries the call's nonce, and Undo (passed through) takes
// back what that call reserved, whether the batch reached Redis before
// the undo, after it (refused by the undo's mark), or never.
type Reserver struct {
	s    *Stock
	opts ReserverOptions

	mu sync.Mutex
	// queued holds, per SKU with a call in flight, the orders waiting for
	// the next one; a SKU absent has no call in flight.
	queued map[string][]*reserveReq
}

type reserveReq struct {
	ctx  context.Context
	item ReserveItem
	done chan reserveResult
}

type reserveResult struct {
	res order.Reservation
	err error
}

// NewReserver returns a Reserver on s. s must not wait for replicas
// (Options.WaitReplicas): a batch has no single reservation to wait for.
func NewReserver(s *Stock, opts ReserverOptions) *Reserver {
	opts.setDefaults()
	return &Reserver{s: s, opts: opts, queued: map[string][]*reserveReq{}}
}

// Reserve is Stock.Reserve, batched.
func (r *Reserver) Reserve(ctx context.Context, o order.Order) (order.Reservation, error) {
	return r.reserve(ctx, o, false)
}

// ReserveRetry is Stock.ReserveRetry, batched.
func (r *Reserver) ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error) {
	return r.reserve(ctx, o, true)
}

// Undo passes through to Stock.Undo.
func (r *Reserver) Undo(ctx context.Context, sku, orderID, nonce string) (int, error) {
	return r.s.Undo(ctx, sku, orderID, nonce)
}

// reserve queues o for its SKU's next call and waits for its results. A
// caller that gives up (ctx) gets its nonce and ctx's error, like a
// Reserve that timed out: its order stays in the call, and the caller's
// Undo takes back whatever the call reserves for it.
func (r *Reserver) reserve(ctx context.Context, o order.Order, retry bool) (order.Reservation, error) {
	req := &reserveReq{ctx: ctx, item: ReserveItem{Order: o, Nonce: order.Nonce(), Retry: retry}, done: make(chan reserveResult, 1)}
	r.mu.Lock()
	waiting, busy := r.queued[o.SKU]
	r.queued[o.SKU] = append(waiting, req)
	r.mu.Unlock()
	if !busy {
		go r.drain(o.SKU)
	}
	select {
	case res := <-req.done:
		return res.res, res.err
	case <-ctx.Done():
		return order.Reservation{Nonce: req.item.Nonce},
			fmt.Errorf("reserve sku=%s order=%s: %w", o.SKU, o.ID, context.Cause(ctx))
	}
}

// drain sends sku's queued orders, MaxBatch at a time, until none is left.
func (r *Reserver) drain(sku string) {
	for {
		r.mu.Lock()
		batch := r.queued[sku]
		if len(batch) == 0 {
			delete(r.queued, sku)
			r.mu.Unlock()
			return
		}
		n := min(len(batch), r.opts.MaxBatch)
		r.queued[sku] = batch[n:]
		r.mu.Unlock()
		r.send(sku, batch[:n])
	}
}

func (r *Reserver) send(sku string, batch []*reserveReq) {
	items := make([]ReserveItem, len(batch))
	for i, req := range batch {
		items[i] = req.item
	}
	ctx, cancel := r.callContext(batch)
	defer cancel()
	out, errs, err := r.s.ReserveMany(ctx, sku, items)
	for i, req := range batch {
		if err != nil {
			req.done <- reserveResult{res: order.Reservation{Nonce: req.item.Nonce}, err: err}
			continue
		}
		req.done <- reserveResult{res: out[i], err: errs[i]}
	}
}

// callContext bounds a call by the latest deadline of its callers (the
// Timeout when one has none): no caller waits past its own, and a caller
// that gave up does not cut the call short for the others.
func (r *Reserver) callContext(batch []*reserveReq) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, req := range batch {
		d, ok := req.ctx.Deadline()
		if !ok {
			return context.WithTimeout(context.Background(), r.opts.Timeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
