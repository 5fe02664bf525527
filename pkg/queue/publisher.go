package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// PublisherOptions configures a Publisher. The zero value means the
// defaults.
type PublisherOptions struct {
	// Channels is the size of the channel pool. Default 8.
	Channels int
	// ConfirmTimeout bounds every publish, from the call of Publish or
	// PublishRaw to its return: the wait behind other messages, opening a
	// channel, the write and the broker's confirm. Past it the publish is
	// answered: not taken when nothing was written, unknown when it was.
	// Default 2s. The order status builds on it (see Bound).
	ConfirmTimeout time.Duration
	// Now stamps published orders. Default time.Now.
	Now func() time.Time
	// Headers, when set, gives the headers of each order Publish sends,
	// from the publisher's context: the trace context (telemetry). Nil
	// adds none. In a batched message an order keeps its string-valued
	// headers only.
	Headers func(ctx context.Context) amqp.Table
	// InFlight is how many messages of Publish may be written and not yet
	// settled by the broker at once: an order is written as soon as
	// there is room, and the orders that arrive while there is none are
	// coalesced into the next message (see coalesce.go). Default 4.
	InFlight int
	// MaxBatch bounds the orders coalesced into one message, 1-MaxBatch.
	// 1 sends every order in its own message. Default MaxBatch.
	MaxBatch int
	// Sent, when set, is told how many orders each message of Publish
	// held, once the message is settled (a metric of coalescing). Nil:
	// nobody is told.
	Sent func(orders int)
}

func (o *PublisherOptions) setDefaults() {
	if o.Channels == 0 {
		o.Channels = 8
	}
	if o.ConfirmTimeout == 0 {
		o.ConfirmTimeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.InFlight == 0 {
		o.InFlight = 4
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = MaxBatch
	}
}

// validate rejects what no default replaces: a negative pool size, confirm
// timeout or in-flight count, or a batch bound outside 0-MaxBatch.
func (o PublisherOptions) validate() error {
	if o.Channels < 0 || o.ConfirmTimeout < 0 || o.InFlight < 0 || o.MaxBatch < 0 || o.MaxBatch > MaxBatch {
		return fmt.Errorf("channels=%d confirm timeout=%v in flight=%d max batch=%d (at most %d): %w",
			o.Channels, o.ConfirmTimeout, o.InFlight, o.MaxBatch, MaxBatch, order.ErrInvalid)
	}
	return nil
}

// Publisher publishes persistent, mandatory messages and returns only once
// the broker confirmed them, or once its bound (PublisherOptions.
// ConfirmTimeout) passed. It keeps a small pool of confirm-mode channels: a
// writer holds one only while it writes a message, and many messages wait
// for their confirm on each channel at once (confirmChannel settles them).
// A channel the broker closed is replaced on next use. Publisher is safe
// for concurrent use.
type Publisher struct {
	conn  *Conn
	topo  Topology
	opts  PublisherOptions
	slots *channelPool
	co    coalescer
	hooks channelHooks
	// notWritten answers the orders whose bound passed in the queue.
	notWritten error

	closeOnce sync.Once
	closed    chan struct{}
}

// NewPublisher builds a publisher of orders to topo's exchange. Channels
// are opened lazily, so it does not need the broker to be up.
func NewPublisher(conn *Conn, topo Topology, opts PublisherOptions) (*Publisher, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("new publisher: %w", err)
	}
	return newPublisher(conn, topo, opts), nil
}

// newPublisher builds a publisher from options known to be valid; their
// zero fields take the defaults here.
func newPublisher(conn *Conn, topo Topology, opts PublisherOptions) *Publisher {
	opts.setDefaults()
	topo.setDefaults()
	p := &Publisher{conn: conn, topo: topo, opts: opts,
		slots: newChannelPool(opts.Channels), closed: make(chan struct{})}
	p.hooks = channelHooks{settled: p.settled,
		expired: unknown(fmt.Errorf("%w (publish bound %v)", ErrConfirmTimeout, opts.ConfirmTimeout))}
	p.notWritten = unavailable(fmt.Errorf("%w (%v)", ErrNotWritten, opts.ConfirmTimeout))
	p.co.reaper = time.AfterFunc(time.Hour, p.reap)
	p.co.reaper.Stop()
	return p
}

// Bound is the longest a call of Publish or PublishRaw takes, from its
// call to its return: PublisherOptions.ConfirmTimeout, its default
// applied. Nothing the publisher waits for extends it. The gateway's order
// status assumes it: a request that reserved an order may take the
// reservation back only until its publish returned and its cleanup ran.
func (p *Publisher) Bound() time.Duration { return p.opts.ConfirmTimeout }

// Why a publish failed. Each comes wrapped together with
// order.ErrUnavailable when the message is certainly in no queue, or with
// order.ErrOutcomeUnknown when the broker may hold it.
var (
	// ErrNacked: the broker refused the message (unavailable).
	ErrNacked = errors.New("broker nacked the message")
	// ErrReturned: no queue is bound for the message (unavailable).
	ErrReturned = errors.New("unroutable, returned by the broker")
	// ErrBlocked: the broker blocks publishers (a resource alarm), so
	// nothing was written (unavailable).
	ErrBlocked = errors.New("connection blocked by the broker")
	// ErrConfirmTimeout: the message was written and no confirm came
	// within the publish's bound (unknown: a memory alarm delays confirms,
	// and the message is enqueued once it lifts).
	ErrConfirmTimeout = errors.New("no confirm in time")
	// ErrNotWritten: the publish's bound passed while the order waited
	// for its turn or for a channel; nothing was written (unavailable).
	ErrNotWritten = errors.New("not written within the publish bound")
	// ErrConfirmLost: the channel closed after the message was written
	// and before its confirm (unknown).
	ErrConfirmLost = errors.New("channel closed before the confirm")
)

// Publish sends o as JSON to the order exchange: alone (MessageId = o.ID)
// or together with the orders published at the same moment in one
// ContentTypeOrders message (see coalesce.go). It returns nil only once the
// broker acked the message holding o into a queue, and in any case within
// Bound of its call. A failure wraps order.ErrUnavailable when o is
// certainly in no queue (not written in time, nacked, returned, broker
// down or blocking) and order.ErrOutcomeUnknown when it may be (written,
// then no confirm in time, the channel lost, or ctx ended while waiting);
// an invalid order wraps order.ErrInvalid.
func (p *Publisher) Publish(ctx context.Context, o order.Order) error {
	deadline := time.Now().Add(p.opts.ConfirmTimeout)
	if err := o.Validate(); err != nil {
		return fmt.Errorf("publish order: %w", err)
	}
	if err := order.ValidateID(o.ID); err != nil {
		return fmt.Errorf("publish order: %w", err)
	}
	body, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("publish order %s: encode: %w", o.ID, err)
	}
	pp := &pendingPublish{id: o.ID, body: body, deadline: deadline, done: make(chan error, 1)}
	if p.opts.Headers != nil {
		pp.headers = p.opts.Headers(ctx)
		if err := pp.headers.Validate(); err != nil {
			return fmt.Errorf("publish order %s: headers: %w", o.ID, err)
		}
	}
	if err := p.refuseEarly(ctx); err != nil {
		return fmt.Errorf("publish order %s: %w", o.ID, err)
	}
	p.submit(pp)
	if err := p.await(ctx, pp); err != nil {
		return fmt.Errorf("publish order %s: %w", o.ID, err)
	}
	return nil
}

// refuseEarly fails a publish that certainly cannot be written now: ctx
// already ended, the publisher closed, the broker blocking publishers.
func (p *Publisher) refuseEarly(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	select {
	case <-p.closed:
		return fmt.Errorf("%w: publisher closed", order.ErrUnavailable)
	default:
	}
	if p.conn.Blocked() {
		return unavailable(ErrBlocked)
	}
	return nil
}

// PublishRaw sends msg as given (set DeliveryMode to amqp.Persistent) to
// exchange with routingKey, mandatory, and waits for the confirm like
// Publish, within the same bound and with the same errors. Replays and
// retries use it.
func (p *Publisher) PublishRaw(ctx context.Context, exchange, routingKey string, msg amqp.Publishing) error {
	m := &message{key: returnKey{msg.MessageId, exchange, routingKey},
		deadline: time.Now().Add(p.opts.ConfirmTimeout), done: make(chan error, 1)}
	if err := msg.Headers.Validate(); err != nil {
		return fmt.Errorf("publish to %s: headers: %w", exchange, err)
	}
	if err := p.write(ctx, exchange, routingKey, msg, m); err != nil {
		return fmt.Errorf("publish to %s: %w", exchange, err)
	}
	var err error
	select {
	case err = <-m.done:
	case <-ctx.Done():
		err = unknown(fmt.Errorf("waiting for confirm: %w", ctx.Err()))
	}
	if err != nil {
		return fmt.Errorf("publish to %s: %w", exchange, err)
	}
	return nil
}

// write writes msg as m on a pooled channel, which then answers m: at its
// confirm, at its deadline or when the channel is lost. An error means m
// was not written, and nothing answers it. Waiting for a channel, and
// opening one, end at m's deadline.
func (p *Publisher) write(ctx context.Context, exchange, routingKey string, msg amqp.Publishing, m *message) error {
	cc, err := p.acquire(ctx, m.deadline)
	if err != nil {
		return err
	}
	if err := cc.register(m); err != nil {
		p.slots.put(cc)
		return unavailable(err)
	}
	err = cc.ch.Publish(exchange, routingKey, true, false, msg)
	p.slots.put(cc)
	if err != nil && cc.unregister(m) {
		return writeFailed(err)
	}
	// Written, or the channel was lost meanwhile and answered m (unknown).
	return nil
}

// writeFailed classifies a publish the library refused. Refused before
// anything was written (the channel or connection already closed, ctx
// already done), the message is in no queue. A failed socket write is
// unknown: the library writes a message's frames into the connection's
// shared buffer, and another channel's flush may have sent them whole
// before the connection failed.
func writeFailed(err error) error {
	if errors.Is(err, amqp.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unavailable(err)
	}
	return unknown(fmt.Errorf("write: %w", err))
}

// unavailable marks a publish failure after which the message is in no
// queue.
func unavailable(err error) error {
	if errors.Is(err, order.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
}

// unknown marks a publish failure after which the broker may hold the
// message.
func unknown(err error) error { return fmt.Errorf("%w: %w", order.ErrOutcomeUnknown, err) }

// acquire takes a pool slot, opening (or replacing a closed) channel in
// it, waiting at most until deadline (or ctx's end) for either. The caller
// puts the slot back right after writing.
func (p *Publisher) acquire(ctx context.Context, deadline time.Time) (*confirmChannel, error) {
	select {
	case <-p.slots.tokens:
	default:
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		select {
		case <-p.slots.tokens:
		case <-ctx.Done():
			return nil, unavailable(fmt.Errorf("waiting for a channel: %w", ctx.Err()))
		case <-timer.C:
			return nil, p.notWritten
		}
	}
	cc := p.slots.pop()
	select {
	case <-p.closed:
		p.slots.put(cc)
		return nil, fmt.Errorf("%w: publisher closed", order.ErrUnavailable)
	default:
	}
	if p.conn.Blocked() {
		p.slots.put(cc)
		return nil, unavailable(ErrBlocked)
	}
	if cc != nil && cc.usable() {
		return cc, nil
	}
	if cc != nil {
		cc.close()
	}
	octx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// A channel opened after the deadline still fills the slot.
	cc, err := openConfirmChannel(octx, p.conn, p.hooks, p.slots.put)
	switch {
	case errors.Is(err, errOpenTimeout):
		// The slot is given back when the open ends.
		return nil, unavailable(fmt.Errorf("%w: %w", ErrNotWritten, err))
	case err != nil:
		p.slots.put(nil)
		return nil, unavailable(err)
	}
	return cc, nil
}

// Close fails the orders still waiting in the publish queue (unavailable)
// and closes the pooled channels: the messages they still wait a confirm
// for are answered unknown (ErrConfirmLost). The connection stays open.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		p.closeQueue()
		for range p.opts.Channels {
			<-p.slots.tokens
			if cc := p.slots.pop(); cc != nil {
				cc.close()
			}
		}
		for range p.opts.Channels {
			p.slots.put(nil)
		}
	})
	return nil
}
