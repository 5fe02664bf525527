package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// ErrAlreadySettled is returned by Ack, Retry and Dead on a delivery that
// was already settled.
var ErrAlreadySettled = errors.New("delivery already settled")

// settler publishes the copies Retry and Dead make; one per Run.
type settler struct {
	pub   *Publisher
	topo  Topology
	tiers []string
	now   func() time.Time
}

// Delivery is one order from the work queue: a single-order message, or
// one order of a batched message (ContentTypeOrders), which the consumer
// splits into one Delivery per order. Settle it with exactly one of Ack,
// Retry or Dead; they are safe to call from any goroutine. A batched
// message is acked once each of its orders is settled; a Retry or Dead of
// one order publishes that order alone, so the others are not repeated.
type Delivery struct {
	// Body is the order as JSON (unless malformed).
	Body []byte
	// Headers are the message headers, including surge's x-surge-*; for
	// an order of a batch, the message's plus the order's own.
	Headers amqp.Table
	// MessageID is the order id the publisher set.
	MessageID string
	// Redelivered is true when the broker delivered it before (a worker
	// died or lost its connection without settling it).
	Redelivered bool

	// raw is the message, or for an order of a batch its single-order
	// view (no acknowledger: it settles through batch).
	raw     amqp.Delivery
	batch   *batchMessage
	s       *settler
	settled atomic.Bool
}

func newDelivery(raw amqp.Delivery, s *settler) *Delivery {
	return &Delivery{Body: raw.Body, Headers: raw.Headers, MessageID: raw.MessageId,
		Redelivered: raw.Redelivered, raw: raw, s: s}
}

// deliveriesOf splits a message into its orders: one Delivery for a
// single-order message, and for a batched one a Delivery per order. A
// batch whose body cannot be read is one Delivery, which the handler
// parks as malformed.
func deliveriesOf(raw amqp.Delivery, s *settler) []*Delivery {
	if !isBatch(raw.ContentType) {
		return []*Delivery{newDelivery(raw, s)}
	}
	entries, err := decodeBatch(raw.Body)
	if err != nil {
		return []*Delivery{newDelivery(raw, s)}
	}
	b := &batchMessage{raw: raw}
	b.left.Store(int32(len(entries)))
	out := make([]*Delivery, len(entries))
	for i, e := range entries {
		d := newDelivery(entryDelivery(raw, e, nil), s)
		d.batch = b
		out[i] = d
	}
	return out
}

// batchMessage is a batched message whose orders are being settled: it
// is acked once all of them are, or requeued whole if one of them had to
// be put back (its retry or dead-letter copy could not be published).
type batchMessage struct {
	raw     amqp.Delivery
	left    atomic.Int32
	requeue atomic.Bool
}

// settled records one order settled; the last one settles the message.
func (b *batchMessage) settled(requeue bool) error {
	if requeue {
		b.requeue.Store(true)
	}
	if b.left.Add(-1) > 0 {
		return nil
	}
	if b.requeue.Load() {
		return b.raw.Nack(false, true)
	}
	return b.raw.Ack(false)
}

// ack acknowledges the message, or this order of its batch.
func (d *Delivery) ack() error {
	if d.batch != nil {
		return d.batch.settled(false)
	}
	return d.raw.Ack(false)
}

// requeue puts the message back, or marks this order's batch to be put
// back whole once its other orders are settled (a redelivered batch is
// split again; the orders already processed are duplicates).
func (d *Delivery) requeue() error {
	if d.batch != nil {
		return d.batch.settled(true)
	}
	return d.raw.Nack(false, true)
}

// Order decodes and validates the body. A body that is not an order, or
// an invalid one, gives an error wrapping order.ErrInvalid: park such a
// message with Dead(order.ReasonMalformed, err).
func (d *Delivery) Order() (order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(d.Body, &o); err != nil {
		return order.Order{}, fmt.Errorf("decode order: %w: %w", order.ErrInvalid, err)
	}
	if err := o.Validate(); err != nil {
		return order.Order{}, fmt.Errorf("decode order: %w", err)
	}
	if err := order.ValidateID(o.ID); err != nil {
		return order.Order{}, fmt.Errorf("decode order: %w", err)
	}
	return o, nil
}

// Attempts is how many times processing this message failed before (0 on
// the first delivery).
func (d *Delivery) Attempts() int { return headerInt(d.Headers, HeaderAttempts) }

// Ack removes the message from the work queue: it was processed.
func (d *Delivery) Ack() error {
	if !d.settled.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	if err := d.ack(); err != nil {
		return fmt.Errorf("ack %s: %w: %w", d.MessageID, order.ErrUnavailable, err)
	}
	return nil
}

// Retry publishes (confirmed) a copy with one more attempt to the next
// retry tier, then acks the original; after the last tier it parks the
// message with ReasonRetriesExhausted instead. A crash between publish and
// ack duplicates the message, never loses it. When the publish fails the
// original is requeued and the error wraps order.ErrUnavailable.
func (d *Delivery) Retry(cause error) error {
	if !d.settled.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	attempts := d.Attempts() + 1
	if attempts > len(d.s.tiers) {
		return d.park(ReasonRetriesExhausted, cause, attempts)
	}
	tier := d.s.tiers[attempts-1]
	msg := republishing(d.raw, d.failureHeaders(cause, attempts))
	return d.republish(d.s.topo.RetryExchange, tier, msg, "retry")
}

// Dead parks the message in the dead queue with reason (for example
// order.ReasonMalformed or order.ReasonUnknownSKU), cause and a new dead
// letter id, published (confirmed) before the original is acked.
func (d *Delivery) Dead(reason string, cause error) error {
	if !d.settled.CompareAndSwap(false, true) {
		return ErrAlreadySettled
	}
	return d.park(reason, cause, d.Attempts()+1)
}

func (d *Delivery) park(reason string, cause error, attempts int) error {
	h := d.failureHeaders(cause, attempts)
	h[HeaderReason] = reason
	h[HeaderDeadID] = ulid.Make().String()
	msg := republishing(d.raw, h)
	return d.republish(d.s.topo.DeadExchange, d.s.topo.RoutingKey, msg, "dead-letter")
}

// republish publishes msg, then acks the original; when the publish
// fails it requeues the original so nothing is lost.
func (d *Delivery) republish(exchange, key string, msg amqp.Publishing, action string) error {
	ctx := context.Background()
	if err := d.s.pub.PublishRaw(ctx, exchange, key, msg); err != nil {
		if nerr := d.requeue(); nerr != nil {
			err = errors.Join(err, fmt.Errorf("requeue: %w", nerr))
		}
		return fmt.Errorf("%s %s: %w", action, d.MessageID, err)
	}
	if err := d.ack(); err != nil {
		return fmt.Errorf("%s %s: ack original: %w: %w", action, d.MessageID, order.ErrUnavailable, err)
	}
	return nil
}

// failureHeaders copies the headers and records one more failure.
func (d *Delivery) failureHeaders(cause error, attempts int) amqp.Table {
	now := formatTime(d.s.now())
	h := copyHeaders(d.Headers, func(k string) bool { return k == "x-delivery-count" })
	h[HeaderAttempts] = int32(attempts)
	if cause != nil {
		h[HeaderLastError] = truncate(cause.Error(), maxErrorLen)
	}
	if headerString(d.Headers, HeaderFirstFailure) == "" {
		h[HeaderFirstFailure] = now
	}
	h[HeaderLastFailure] = now
	return h
}
