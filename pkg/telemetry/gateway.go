package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/order"
)

// OrderClaimer spends a customer's budget and claims an order's
// idempotency record (the admit script). gateway.Claimer's methods.
type OrderClaimer interface {
	Claim(ctx context.Context, o order.Order, key string, soldOut bool) (order.Claim, error)
	Existing(ctx context.Context, o order.Order, key string) (orderID string, open bool, err error)
	Forget(ctx context.Context, c order.Claim) (bool, error)
	Unmark(ctx context.Context, c order.Claim) (bool, error)
}

// Claimer traces Next's Claim (one Redis script on the customer's slot);
// the rarer calls pass through.
type Claimer struct {
	Next OrderClaimer
	T    *Tracing
}

var _ OrderClaimer = Claimer{}

// Claim runs Next.Claim in a "redis admit" span. Refusals a buyer is
// answered (rate limited, another body, sold out) are no span error.
func (c Claimer) Claim(ctx context.Context, o order.Order, key string, soldOut bool) (order.Claim, error) {
	ctx, span := c.T.start(ctx, "redis admit", trace.SpanKindClient, redisAttrs("admit", o)...)
	claim, err := c.Next.Claim(ctx, o, key, soldOut)
	span.SetAttributes(attribute.String("surge.order_id", claim.OrderID), attribute.Bool("surge.claim.created", claim.Created))
	end(span, err, order.ErrRateLimited, order.ErrIdempotencyMismatch, order.ErrSoldOut)
	return claim, err
}

// Existing calls Next.Existing.
func (c Claimer) Existing(ctx context.Context, o order.Order, key string) (string, bool, error) {
	return c.Next.Existing(ctx, o, key)
}

// Forget calls Next.Forget.
func (c Claimer) Forget(ctx context.Context, claim order.Claim) (bool, error) {
	return c.Next.Forget(ctx, claim)
}

// Unmark calls Next.Unmark.
func (c Claimer) Unmark(ctx context.Context, claim order.Claim) (bool, error) {
	return c.Next.Unmark(ctx, claim)
}

// StockReserver holds stock for orders. gateway.Reserver's methods.
type StockReserver interface {
	Reserve(ctx context.Context, o order.Order) (order.Reservation, error)
	ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error)
	Undo(ctx context.Context, sku, orderID, nonce string) (int, error)
}

// Reserver traces Next's reserve and undo scripts.
type Reserver struct {
	Next StockReserver
	T    *Tracing
}

var _ StockReserver = Reserver{}

// Reserve runs Next.Reserve in a "redis reserve" span.
func (r Reserver) Reserve(ctx context.Context, o order.Order) (order.Reservation, error) {
	ctx, span := r.T.start(ctx, "redis reserve", trace.SpanKindClient, redisAttrs("reserve", o)...)
	res, err := r.Next.Reserve(ctx, o)
	endReserve(span, res, err)
	return res, err
}

// ReserveRetry runs Next.ReserveRetry in a "redis reserve" span.
func (r Reserver) ReserveRetry(ctx context.Context, o order.Order) (order.Reservation, error) {
	ctx, span := r.T.start(ctx, "redis reserve", trace.SpanKindClient,
		append(redisAttrs("reserve", o), attribute.Bool("surge.retry", true))...)
	res, err := r.Next.ReserveRetry(ctx, o)
	endReserve(span, res, err)
	return res, err
}

func endReserve(span trace.Span, res order.Reservation, err error) {
	span.SetAttributes(attribute.Bool("surge.reservation.repeat", res.Repeat), attribute.Int("surge.available", res.Avail))
	end(span, err, order.ErrSoldOut)
}

// Undo runs Next.Undo in a "redis undo" span.
func (r Reserver) Undo(ctx context.Context, sku, orderID, nonce string) (int, error) {
	ctx, span := r.T.start(ctx, "redis undo", trace.SpanKindClient,
		attribute.String("db.system.name", "redis"), attribute.String("surge.sku", sku), attribute.String("surge.order_id", orderID))
	n, err := r.Next.Undo(ctx, sku, orderID, nonce)
	end(span, err)
	return n, err
}

// OrderPublisher hands an order to the queue. gateway.Publisher's method.
type OrderPublisher interface {
	Publish(ctx context.Context, o order.Order) error
}

// Publisher traces Next's confirmed publish in a producer span, whose
// context the message carries when Next's queue.Publisher has
// Tracing.Headers as its PublisherOptions.Headers.
type Publisher struct {
	Next     OrderPublisher
	T        *Tracing
	Exchange string
}

var _ OrderPublisher = Publisher{}

// Publish runs Next.Publish in a "<exchange> publish" span.
func (p Publisher) Publish(ctx context.Context, o order.Order) error {
	ctx, span := p.T.start(ctx, p.Exchange+" publish", trace.SpanKindProducer,
		attribute.String("messaging.system", "rabbitmq"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.destination.name", p.Exchange),
		attribute.String("messaging.message.id", o.ID),
		attribute.String("surge.sku", o.SKU))
	err := p.Next.Publish(ctx, o)
	end(span, err)
	return err
}

func redisAttrs(script string, o order.Order) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("db.system.name", "redis"),
		attribute.String("db.operation.name", "EVALSHA "+script),
		attribute.String("surge.sku", o.SKU),
		attribute.Int("surge.qty", o.Qty),
	}
}
