package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/order"
	"surge/pkg/worker"
)

// WorkerObserver traces the worker's steps: taking the order's lock (the
// wait included), the MySQL transaction (with batching, the wait for the
// batch the order joined included) and the Redis commit and release
// scripts. It implements worker.Observer. The worker takes the lock with
// the caller's context, so the work done under the lock is traced beside
// the lock's span, not inside it.
type WorkerObserver struct{ T *Tracing }

var _ worker.Observer = WorkerObserver{}

// Begin opens the step's span under ctx's.
func (w WorkerObserver) Begin(ctx context.Context, step worker.Step, o order.Order) context.Context {
	switch step {
	case worker.StepLock:
		ctx, _ = w.T.start(ctx, "lock", trace.SpanKindClient,
			attribute.String("db.system.name", "redis"), attribute.String("surge.lock", worker.LockName(o.ID)))
	case worker.StepLedger:
		ctx, _ = w.T.start(ctx, "mysql order", trace.SpanKindClient,
			attribute.String("db.system.name", "mysql"), attribute.String("surge.order_id", o.ID),
			attribute.String("surge.sku", o.SKU), attribute.Int("surge.qty", o.Qty))
	case worker.StepCommit:
		ctx, _ = w.T.start(ctx, "redis commit", trace.SpanKindClient, settleAttrs("commit", o)...)
	case worker.StepRelease:
		ctx, _ = w.T.start(ctx, "redis release", trace.SpanKindClient, settleAttrs("release", o)...)
	}
	return ctx
}

// End closes the span Begin opened in ctx.
func (w WorkerObserver) End(ctx context.Context, step worker.Step, _ order.Order, r worker.Result) {
	span := trace.SpanFromContext(ctx)
	switch step {
	case worker.StepLock:
		span.SetAttributes(attribute.Int64("surge.fence", r.Fence))
	case worker.StepLedger:
		span.SetAttributes(attribute.String("surge.status", string(r.Processed.Status)), attribute.Bool("surge.duplicate", r.Processed.Duplicate))
	case worker.StepCommit:
		span.SetAttributes(attribute.Int("surge.commit.outcome", int(r.Commit)))
	case worker.StepRelease:
	default:
		return
	}
	end(span, r.Err)
}

// Observe does nothing: the consume span (Tracing.Consume) covers the
// delivery.
func (WorkerObserver) Observe(string, time.Duration) {}

func settleAttrs(script string, o order.Order) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA "+script),
		attribute.String("surge.sku", o.SKU),
		attribute.String("surge.order_id", o.ID),
	}
}
