package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/order"
)

// OrderLocker is worker.Locker's method.
type OrderLocker interface {
	Lock(ctx context.Context, name string) (fence int64, held context.Context, release func(), err error)
}

// Locker traces taking Next's lock (the wait included).
type Locker struct {
	Next OrderLocker
	T    *Tracing
}

var _ OrderLocker = Locker{}

// Lock takes Next's lock in a "lock" span. The held context it returns
// carries the caller's span again, so the work done under the lock is
// traced beside the lock's span, not inside it.
func (l Locker) Lock(ctx context.Context, name string) (int64, context.Context, func(), error) {
	parent := trace.SpanFromContext(ctx)
	sctx, span := l.T.start(ctx, "lock", trace.SpanKindClient,
		attribute.String("db.system.name", "redis"), attribute.String("surge.lock", name))
	fence, held, release, err := l.Next.Lock(sctx, name)
	span.SetAttributes(attribute.Int64("surge.fence", fence))
	end(span, err)
	if held != nil {
		held = trace.ContextWithSpan(held, parent)
	}
	return fence, held, release, err
}

// OrderLedger is worker.Ledger's method.
type OrderLedger interface {
	Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error)
}

// Ledger traces Next's MySQL transaction (with batching, the wait for the
// batch the order joined included).
type Ledger struct {
	Next OrderLedger
	T    *Tracing
}

var _ OrderLedger = Ledger{}

// Process runs Next.Process in a "mysql order" span.
func (l Ledger) Process(ctx context.Context, o order.Order, fence int64) (order.Processed, error) {
	ctx, span := l.T.start(ctx, "mysql order", trace.SpanKindClient,
		attribute.String("db.system.name", "mysql"), attribute.String("surge.order_id", o.ID),
		attribute.String("surge.sku", o.SKU), attribute.Int("surge.qty", o.Qty))
	res, err := l.Next.Process(ctx, o, fence)
	span.SetAttributes(attribute.String("surge.status", string(res.Status)), attribute.Bool("surge.duplicate", res.Duplicate))
	end(span, err)
	return res, err
}

// OrderSettler is worker.Settler's methods.
type OrderSettler interface {
	Commit(ctx context.Context, sku, orderID string, qty int) (order.CommitOutcome, error)
	Release(ctx context.Context, sku, orderID string, mode order.ReleaseMode) (int, error)
}

// Settler traces Next's commit and release scripts.
type Settler struct {
	Next OrderSettler
	T    *Tracing
}

var _ OrderSettler = Settler{}

// Commit runs Next.Commit in a "redis commit" span.
func (s Settler) Commit(ctx context.Context, sku, orderID string, qty int) (order.CommitOutcome, error) {
	ctx, span := s.T.start(ctx, "redis commit", trace.SpanKindClient, settleAttrs("commit", sku, orderID)...)
	out, err := s.Next.Commit(ctx, sku, orderID, qty)
	span.SetAttributes(attribute.Int("surge.commit.outcome", int(out)))
	end(span, err)
	return out, err
}

// Release runs Next.Release in a "redis release" span.
func (s Settler) Release(ctx context.Context, sku, orderID string, mode order.ReleaseMode) (int, error) {
	ctx, span := s.T.start(ctx, "redis release", trace.SpanKindClient, settleAttrs("release", sku, orderID)...)
	n, err := s.Next.Release(ctx, sku, orderID, mode)
	end(span, err)
	return n, err
}

func settleAttrs(script, sku, orderID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA "+script),
		attribute.String("surge.sku", sku),
		attribute.String("surge.order_id", orderID),
	}
}
