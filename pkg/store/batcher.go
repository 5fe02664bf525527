package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"surge/pkg/order"
)

// BatcherOptions tunes a Batcher. The zero value means the defaults.
type BatcherOptions struct {
	// MaxBatch caps the orders of one transaction. Default 256.
	MaxBatch int
	// Linger is how long a flusher waits for more orders once it holds
	// fewer than MaxBatch; 0 means the default 1ms, negative flushes at
	// once with whatever is queued.
	Linger time.Duration
	// Flushers is how many transactions may run at once (batches of
	// different SKUs proceed in parallel; one SKU's row lock serialises
	// its own). Default 2.
	Flushers int
}

func (o *BatcherOptions) setDefaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Linger == 0 {
		o.Linger = time.Millisecond
	}
	if o.Flushers <= 0 {
		o.Flushers = 2
	}
}

// Batcher coalesces concurrent Process calls into ProcessBatch
// transactions: under load many orders share one commit, one guarded
// UPDATE per SKU and multi-row INSERTs; alone, an order waits at most
// Linger. It has Process's contract, so the worker uses it unchanged.
type Batcher struct {
	s    *Store
	opts BatcherOptions
	reqs chan *batchReq
	quit chan struct{}
	// stopped is closed once every flusher has exited: a request queued
	// after that gets no answer and must not wait for one.
	stopped chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	batches, orders atomic.Int64
}

// Stats reports how many transactions ran and how many orders they
// carried, for metrics and tests.
func (b *Batcher) Stats() (batches, orders int64) { return b.batches.Load(), b.orders.Load() }

type batchReq struct {
	ctx  context.Context
	item BatchItem
	done chan BatchResult
}

// NewBatcher starts the flushers; Close stops them.
func NewBatcher(s *Store, opts BatcherOptions) *Batcher {
	opts.setDefaults()
	b := &Batcher{s: s, opts: opts, reqs: make(chan *batchReq, opts.MaxBatch*opts.Flushers),
		quit: make(chan struct{}), stopped: make(chan struct{})}
	for i := 0; i < opts.Flushers; i++ {
		b.wg.Add(1)
		go b.flusher()
	}
	return b
}

// Process queues o for the next batch and waits for its outcome, with the
// same results and errors as Store.Process.
func (b *Batcher) Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error) {
	r := &batchReq{ctx: ctx, item: BatchItem{Order: o, Fence: fence}, done: make(chan BatchResult, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return order.Processed{}, ctx.Err()
	case <-b.quit:
		return order.Processed{}, fmt.Errorf("process order=%s: batcher closed", o.ID)
	}
	select {
	case res := <-r.done:
		return res.Processed, res.Err
	case <-b.stopped:
		select {
		case res := <-r.done:
			return res.Processed, res.Err
		default:
			return order.Processed{}, fmt.Errorf("process order=%s: batcher closed", o.ID)
		}
	case <-ctx.Done():
		// The batch may still commit the order; a redelivery finds it as
		// a duplicate.
		return order.Processed{}, ctx.Err()
	}
}

// Close stops the flushers after the batches in flight; calls still
// queued get an error.
func (b *Batcher) Close() {
	b.once.Do(func() {
		close(b.quit)
		b.wg.Wait()
		close(b.stopped)
	})
	<-b.stopped
}

func (b *Batcher) flusher() {
	defer b.wg.Done()
	for {
		var first *batchReq
		select {
		case first = <-b.reqs:
		case <-b.quit:
			b.failQueued()
			return
		}
		b.flush(b.collect(first))
	}
}

// collect gathers up to MaxBatch requests: whatever is queued, then what
// arrives within Linger.
func (b *Batcher) collect(first *batchReq) []*batchReq {
	batch := []*batchReq{first}
	var timer <-chan time.Time
	if b.opts.Linger > 0 {
		t := time.NewTimer(b.opts.Linger)
		defer t.Stop()
		timer = t.C
	}
	for len(batch) < b.opts.MaxBatch {
		if timer == nil {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
				continue
			default:
				return batch
			}
		}
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-timer:
			timer = nil
		}
	}
	return batch
}

// flush runs one transaction for the live requests of batch.
func (b *Batcher) flush(batch []*batchReq) {
	live := batch[:0]
	for _, r := range batch {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	items := make([]BatchItem, len(live))
	for i, r := range live {
		items[i] = r.item
	}
	// The transaction is not tied to any one caller's context: one caller
	// giving up must not roll back the others' orders.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.s.ProcessBatch(ctx, items)
	b.batches.Add(1)
	b.orders.Add(int64(len(items)))
	if err != nil && len(items) > 1 && !IsTransient(err) {
		// One order MySQL refuses must not fail its batch-mates: isolate
		// it by processing the batch one order at a time.
		out, err = b.oneByOne(ctx, items), nil
	}
	for i, r := range live {
		if err != nil {
			r.done <- BatchResult{Err: err}
			continue
		}
		r.done <- out[i]
	}
}

func (b *Batcher) oneByOne(ctx context.Context, items []BatchItem) []BatchResult {
	out := make([]BatchResult, len(items))
	for i, it := range items {
		out[i].Processed, out[i].Err = b.s.Process(ctx, it.Order, it.Fence)
	}
	return out
}

func (b *Batcher) failQueued() {
	for {
		select {
		case r := <-b.reqs:
			r.done <- BatchResult{Err: fmt.Errorf("process order=%s: batcher closed", r.item.Order.ID)}
		default:
			return
		}
	}
}
