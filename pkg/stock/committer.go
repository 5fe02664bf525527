package stock

import (
	"context"
	"fmt"
	"time"

	"surge/internal/coalesce"
	"surge/pkg/order"
)

// CommitterOptions tunes a Committer. The zero value means the defaults.
type CommitterOptions struct {
	// MaxBatch caps the orders of one CommitMany call. Default 256.
	MaxBatch int
	// Timeout bounds one CommitMany call, which is tied to no single
	// caller's context. Default 5s.
	Timeout time.Duration
}

func (o *CommitterOptions) setDefaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
}

// Committer settles a SKU's orders in Redis per batch: concurrent Commit
// calls for one SKU share CommitMany calls. A SKU with no call in flight
// sends its first order at once; the orders that arrive while a call is in
// flight go together in the next. So an order waits for at most one
// call ahead of its own, and a hot SKU costs one script call per round
// trip instead of one per order. It has Commit's contract (idempotent per
// order, run only after MySQL committed), and passes Release through, so
// the worker uses it in place of a Stock.
type Committer struct {
	s       *Stock
	opts    CommitterOptions
	batches *coalesce.Coalescer[*commitReq]
}

type commitReq struct {
	item CommitItem
	done chan commitResult
}

type commitResult struct {
	out order.CommitOutcome
	err error
}

// NewCommitter returns a Committer on s.
func NewCommitter(s *Stock, opts CommitterOptions) *Committer {
	opts.setDefaults()
	c := &Committer{s: s, opts: opts}
	c.batches = coalesce.New(opts.MaxBatch, c.send)
	return c
}

// Commit queues the order for its SKU's next CommitMany call and waits for
// its outcome, with Stock.Commit's results and errors. A caller that gives
// up (ctx) leaves its order in the call, which still commits it: MySQL has
// invoiced it, so Redis must say so.
func (c *Committer) Commit(ctx context.Context, sku, orderID string, qty int) (order.CommitOutcome, error) {
	r := &commitReq{item: CommitItem{OrderID: orderID, Qty: qty}, done: make(chan commitResult, 1)}
	c.batches.Add(sku, r)
	select {
	case res := <-r.done:
		return res.out, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("commit sku=%s order=%s: %w", sku, orderID, context.Cause(ctx))
	}
}

func (c *Committer) send(sku string, batch []*commitReq) {
	items := make([]CommitItem, len(batch))
	for i, r := range batch {
		items[i] = r.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	out, err := c.s.CommitMany(ctx, sku, items)
	for i, r := range batch {
		if err != nil {
			r.done <- commitResult{err: err}
			continue
		}
		r.done <- commitResult{out: out[i]}
	}
}

// Release passes through to Stock.Release.
func (c *Committer) Release(ctx context.Context, sku, orderID string, mode order.ReleaseMode) (int, error) {
	return c.s.Release(ctx, sku, orderID, mode)
}
