package telemetry

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/queue"
)

// HeaderCarrier carries trace context (W3C traceparent and tracestate) in
// an AMQP message's headers.
type HeaderCarrier amqp.Table

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the header key as a string ("" when absent or not one).
func (c HeaderCarrier) Get(key string) string {
	v, _ := c[key].(string)
	return v
}

// Set sets the header key.
func (c HeaderCarrier) Set(key, value string) { c[key] = value }

// Keys lists the headers.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Headers returns the headers that carry ctx's span to the consumer, for
// queue.PublisherOptions.Headers; nil when ctx holds no span.
func (t *Tracing) Headers(ctx context.Context) amqp.Table {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	h := amqp.Table{}
	t.prop.Inject(ctx, HeaderCarrier(h))
	return h
}

// Consume wraps a work-queue handler in a consumer span that continues
// the trace the message's headers carry (the gateway's publish span is its
// parent), so one order is one trace from its POST to its invoice. A
// retried order, whose copies keep the headers, continues the same trace.
func (t *Tracing) Consume(queueName string, next queue.Handler) queue.Handler {
	return func(ctx context.Context, d *queue.Delivery) {
		ctx = t.prop.Extract(ctx, HeaderCarrier(d.Headers))
		ctx, span := t.start(ctx, "process "+queueName, trace.SpanKindConsumer,
			attribute.String("messaging.system", "rabbitmq"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", queueName),
			attribute.String("messaging.message.id", d.MessageID),
			attribute.Bool("messaging.rabbitmq.redelivered", d.Redelivered),
			attribute.Int("surge.attempts", d.Attempts()))
		defer span.End()
		next(ctx, d)
	}
}
