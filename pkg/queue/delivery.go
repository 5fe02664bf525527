package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	// ctx is the handlers' context: it ends when the consumer gives up
	// waiting for them (ConsumerOptions.DrainTimeout), and with it the
	// tries of a copy the broker refuses.
	ctx context.Context
	log *slog.Logger
}

// Bounds of the wait between two tries of a copy the broker refused.
const (
	copyBackoffMin = 100 * time.Millisecond
	copyBackoffMax = 5 * time.Second
)

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
// is acked once all of them are. Nothing here puts it back (see
// republish): only the broker does, whole, when the channel it came on
// closes before that.
type batchMessage struct {
	raw  amqp.Delivery
	left atomic.Int32
}

// settled records one order settled; the last one acks the message.
func (b *batchMessage) settled() error {
	if b.left.Add(-1) > 0 {
		return nil
	}
	return b.raw.Ack(false)
}

// ack acknowledges the message, or this order of its batch.
func (d *Delivery) ack() error {
	if d.batch != nil {
		return d.batch.settled()
	}
	return d.raw.Ack(false)
}

// originClosed tells whether the channel the message came on is closed:
// the broker then holds it again, unacked, and delivers it anew (a batch
// whole).
func (d *Delivery) originClosed() bool {
	ack := d.raw.Acknowledger
	if d.batch != nil {
		ack = d.batch.raw.Acknowledger
	}
	ch, ok := ack.(interface{ IsClosed() bool })
	return ok && ch.IsClosed()
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
// ack duplicates the message, never loses it. A copy the broker refuses
// is tried again until it is confirmed (see republish), so Retry may take
// as long as the broker refuses publishes; it fails, with an error
// wrapping order.ErrUnavailable, only once the original is back with the
// broker.
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
// letter id, published (confirmed) before the original is acked and tried
// again while the broker refuses it, as Retry's copy is.
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

// republish publishes msg (confirmed), then acks the original, or for an
// order of a batch records it settled. A publish that fails is tried
// again, the wait doubling from copyBackoffMin up to copyBackoffMax, while
// the original stays unacked. It is never put back for that: a batch would
// come back whole, with the orders already settled, at once and over and
// over (each return counts against the work queue's delivery limit, past
// which the broker parks the whole batch), and an order retried before
// would get a second copy. The tries end when the channel the original
// came on closes or the consumer stops waiting for its handlers: the
// broker then has the original back and delivers it again, as after a
// crash, so no copy is published once that channel is closed. A try whose
// outcome is unknown (no confirm in time) may have left a copy: the next
// one may then make a second, never none.
func (d *Delivery) republish(exchange, key string, msg amqp.Publishing, action string) error {
	wait := copyBackoffMin
	for try := 1; ; try++ {
		if d.originClosed() {
			return fmt.Errorf("%s %s: %w: the channel it came on closed, the broker delivers it again",
				action, d.MessageID, order.ErrUnavailable)
		}
		err := d.s.pub.PublishRaw(d.s.ctx, exchange, key, msg)
		if err == nil {
			break
		}
		d.s.log.Warn("copy of an order not published, its message held and the copy tried again",
			"message_id", d.MessageID, "action", action, "try", try, "in", wait, "error", err)
		select {
		case <-d.s.ctx.Done():
			return fmt.Errorf("%s %s: %w: the consumer stopped, the broker delivers it again: %w",
				action, d.MessageID, order.ErrUnavailable, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, copyBackoffMax)
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
