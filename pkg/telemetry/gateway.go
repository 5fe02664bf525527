package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/gateway"
	"surge/pkg/order"
)

// GatewayObserver traces the gateway's steps: the admit script ("redis
// admit"), the reserve and undo scripts, and the confirmed publish in a
// producer span, whose context the message carries when the
// queue.Publisher has Tracing.Headers as its PublisherOptions.Headers. It
// implements gateway.Observer.
type GatewayObserver struct {
	T *Tracing
	// Exchange names the publish span ("<exchange> publish").
	Exchange string
}

var _ gateway.Observer = GatewayObserver{}

// Begin opens the step's span under ctx's.
func (g GatewayObserver) Begin(ctx context.Context, step gateway.Step, o order.Order) context.Context {
	switch step {
	case gateway.StepClaim:
		ctx, _ = g.T.start(ctx, "redis admit", trace.SpanKindClient, redisAttrs("admit", o)...)
	case gateway.StepReserve:
		ctx, _ = g.T.start(ctx, "redis reserve", trace.SpanKindClient, redisAttrs("reserve", o)...)
	case gateway.StepReserveRetry:
		ctx, _ = g.T.start(ctx, "redis reserve", trace.SpanKindClient,
			append(redisAttrs("reserve", o), attribute.Bool("surge.retry", true))...)
	case gateway.StepUndo:
		ctx, _ = g.T.start(ctx, "redis undo", trace.SpanKindClient,
			attribute.String("db.system.name", "redis"), attribute.String("surge.sku", o.SKU), attribute.String("surge.order_id", o.ID))
	case gateway.StepPublish:
		ctx, _ = g.T.start(ctx, g.Exchange+" publish", trace.SpanKindProducer,
			attribute.String("messaging.system", "rabbitmq"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", g.Exchange),
			attribute.String("messaging.message.id", o.ID),
			attribute.String("surge.sku", o.SKU))
	}
	return ctx
}

// End closes the span Begin opened in ctx. Refusals a buyer is answered
// (rate limited, another body, sold out, purchase limit) are no span error.
func (g GatewayObserver) End(ctx context.Context, step gateway.Step, _ order.Order, r gateway.Result) {
	span := trace.SpanFromContext(ctx)
	switch step {
	case gateway.StepClaim:
		span.SetAttributes(attribute.String("surge.order_id", r.Claim.OrderID), attribute.Bool("surge.claim.created", r.Claim.Created))
		end(span, r.Err, order.ErrRateLimited, order.ErrIdempotencyMismatch, order.ErrSoldOut)
	case gateway.StepReserve, gateway.StepReserveRetry:
		span.SetAttributes(attribute.Bool("surge.reservation.repeat", r.Reservation.Repeat), attribute.Int("surge.available", r.Reservation.Avail))
		end(span, r.Err, order.ErrSoldOut, order.ErrPurchaseLimit)
	case gateway.StepUndo, gateway.StepPublish:
		end(span, r.Err)
	}
}

// Answered makes no span: the answers without a step are counted, not
// traced.
func (GatewayObserver) Answered(context.Context, order.Order, gateway.Answer) {}

func redisAttrs(script string, o order.Order) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA "+script),
		attribute.String("surge.sku", o.SKU),
		attribute.Int("surge.qty", o.Qty),
	}
}
