// Package worker turns accepted orders into invoices. For each delivery it
// takes the order's lock (with a fencing token), runs the guarded MySQL
// transaction, settles the reservation in Redis, refreshes the product
// cache, and only then acks. Failures are classified: bad messages and
// unknown SKUs are parked at once with their reason; everything else is
// retried through the queue's delay tiers and parked only when they run
// out (see classify.go).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"surge/pkg/order"
)

// Delivery is one message from the work queue; exactly one of Ack, Retry
// and Dead settles it. *queue.Delivery implements it.
type Delivery interface {
	Order() (order.Order, error)
	Ack() error
	Retry(cause error) error
	Dead(reason string, cause error) error
}

// Ledger is the MySQL side. *store.Store implements it.
type Ledger interface {
	Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error)
}

// Settler is the Redis side. *stock.Stock implements it, and
// *stock.Committer, which settles a SKU's concurrent commits in one call.
type Settler interface {
	Commit(ctx context.Context, sku, orderID string, qty int) (order.CommitOutcome, error)
	Release(ctx context.Context, sku, orderID string, mode order.ReleaseMode) (int, error)
}

// Locker guards an order while it is processed. It returns a fencing
// token, a context cancelled when the lease is lost, and a release func.
// An order's lock is named by its id and taken under its SKU, so that the
// locks of one SKU's orders can be taken together. Nil means no lock
// (fence 0).
type Locker interface {
	Lock(ctx context.Context, sku, name string) (fence int64, held context.Context, release func(), err error)
}

// Refresher updates derived views after a commit (the product cache).
type Refresher interface {
	Refresh(ctx context.Context, sku string)
}

// Processor handles deliveries.
type Processor struct {
	Ledger   Ledger
	Stock    Settler
	Lock     Locker
	Cache    Refresher
	Observer Observer
	// Log defaults to slog.Default().
	Log *slog.Logger
	// Timeout bounds one order's processing (lock, MySQL, Redis), so an
	// engine that stops answering without closing its connections fails
	// the attempt, which is then retried, instead of holding a handler
	// until the TCP stack gives up. Default DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Processor.Timeout's default.
const DefaultTimeout = 10 * time.Second

// Outcomes reported to the Observer's Observe and in logs. A rejected order is an
// accepted order MySQL had no unit for (order.ReasonCompensated). A
// conflict is a message whose order id MySQL holds for another request
// (another SKU, quantity or customer): the key was used again after a
// failover lost its idempotency record; its reservation is released and
// it is not invoiced.
const (
	OutcomeInvoiced  = "invoiced"
	OutcomeRejected  = "rejected"
	OutcomeDuplicate = "duplicate"
	OutcomeConflict  = "conflict"
	OutcomeRetried   = "retried"
	OutcomeDead      = "dead"
)

// Handle processes one delivery and settles it. It never returns an
// error: every failure ends in Retry or Dead, and a failure to settle is
// left to the broker's redelivery.
func (p *Processor) Handle(ctx context.Context, d Delivery) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	outcome, o, err := p.handle(ctx, d)
	if p.Observer != nil {
		p.Observer.Observe(outcome, time.Since(start))
		if lo, ok := p.Observer.(LatencyObserver); ok && outcome == OutcomeInvoiced && o.AcceptedAtMs > 0 {
			lo.Invoiced(time.Since(time.UnixMilli(o.AcceptedAtMs)))
		}
	}
	log := p.Log.With("order_id", o.ID, "sku", o.SKU, "outcome", outcome)
	if err != nil {
		log.Warn("order not processed", "err", err)
		return
	}
	log.Info("order processed", "took_ms", time.Since(start).Milliseconds())
}

func (p *Processor) handle(ctx context.Context, d Delivery) (string, order.Order, error) {
	o, err := d.Order()
	if err != nil {
		return OutcomeDead, o, settle(d.Dead(order.ReasonMalformed, err), err)
	}
	res, err := p.process(ctx, o)
	switch {
	case errors.Is(err, order.ErrUnknownSKU):
		return OutcomeDead, o, settle(d.Dead(order.ReasonUnknownSKU, err), err)
	case errors.Is(err, order.ErrStaleFence):
		// A newer lock holder owns this order and wrote it: this delivery
		// is a late duplicate.
		return OutcomeDuplicate, o, d.Ack()
	case err != nil:
		if reason, ok := permanent(err); ok {
			return OutcomeDead, o, settle(d.Dead(reason, err), err)
		}
		return OutcomeRetried, o, settle(d.Retry(err), err)
	}
	outcome := string(res.Status)
	switch {
	case conflicting(res, o):
		outcome = OutcomeConflict
	case res.Duplicate:
		outcome = OutcomeDuplicate
	}
	return outcome, o, d.Ack()
}

// settle reports the settle error if any, else the cause.
func settle(settleErr, cause error) error {
	if settleErr != nil {
		return fmt.Errorf("settle after %v: %w", cause, settleErr)
	}
	return cause
}

// process runs the order under its lock: MySQL first, then Redis.
func (p *Processor) process(ctx context.Context, o order.Order) (order.Processed, error) {
	var fence int64
	if p.Lock != nil {
		f, held, release, err := p.lock(ctx, o)
		if err != nil {
			return order.Processed{}, fmt.Errorf("lock order=%s: %w", o.ID, err)
		}
		defer release()
		fence, ctx = f, held
	}
	lctx := p.begin(ctx, StepLedger, o)
	res, err := p.Ledger.Process(lctx, o, fence)
	p.end(lctx, StepLedger, o, Result{Err: err, Processed: res})
	if err != nil {
		return res, fmt.Errorf("process order=%s: %w", o.ID, err)
	}
	if err := p.settleStock(ctx, o, res); err != nil {
		return res, err
	}
	if p.Cache != nil {
		p.Cache.Refresh(ctx, o.SKU)
	}
	return res, nil
}

// lock takes o's lock, telling the observer how long it took.
func (p *Processor) lock(ctx context.Context, o order.Order) (int64, context.Context, func(), error) {
	name := LockName(o.ID)
	if p.Observer == nil {
		return p.Lock.Lock(ctx, o.SKU, name)
	}
	lctx := p.Observer.Begin(ctx, StepLock, o)
	start := time.Now()
	fence, held, release, err := p.Lock.Lock(ctx, o.SKU, name)
	p.Observer.End(lctx, StepLock, o, Result{Err: err, Fence: fence, Took: time.Since(start)})
	return fence, held, release, err
}

// settleStock applies MySQL's verdict to the reservation. Both scripts are
// idempotent, so a duplicate delivery repairs a Redis step a crash skipped.
// A message conflicting with the order MySQL holds under its id sold
// nothing: its reservation (on its own SKU) is released.
func (p *Processor) settleStock(ctx context.Context, o order.Order, res order.Processed) error {
	var err error
	switch {
	case conflicting(res, o):
		p.Log.Error("order id reused for another request: not invoiced, reservation released",
			"order_id", o.ID, "sku", o.SKU, "qty", o.Qty, "recorded_sku", res.Recorded.SKU, "recorded_qty", res.Recorded.Qty)
		err = p.release(ctx, o)
	case res.Status == order.StatusInvoiced:
		err = p.commit(ctx, o)
	case res.Status == order.StatusRejected:
		err = p.release(ctx, o)
	}
	if errors.Is(err, order.ErrNotLoaded) || errors.Is(err, order.ErrCommitted) {
		// MySQL holds the truth; the reconciler aligns a SKU Redis lost.
		p.Log.Warn("stock not settled in Redis", "order_id", o.ID, "sku", o.SKU, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("settle stock order=%s: %w", o.ID, err)
	}
	return nil
}

func (p *Processor) commit(ctx context.Context, o order.Order) error {
	cctx := p.begin(ctx, StepCommit, o)
	out, err := p.Stock.Commit(cctx, o.SKU, o.ID, o.Qty)
	p.end(cctx, StepCommit, o, Result{Err: err, Commit: out})
	return err
}

func (p *Processor) release(ctx context.Context, o order.Order) error {
	rctx := p.begin(ctx, StepRelease, o)
	_, err := p.Stock.Release(rctx, o.SKU, o.ID, order.ReleaseRejected)
	p.end(rctx, StepRelease, o, Result{Err: err})
	return err
}

// conflicting tells whether MySQL holds o's id for another request.
func conflicting(res order.Processed, o order.Order) bool {
	r := res.Recorded
	return res.Duplicate && r.ID != "" && (r.SKU != o.SKU || r.Qty != o.Qty || r.CustomerID != o.CustomerID)
}

// New returns the processor p describes, its zero fields given their
// defaults: Timeout DefaultTimeout, Log slog.Default().
func New(p Processor) *Processor {
	p.setDefaults()
	return &p
}

func (p *Processor) setDefaults() {
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
}
