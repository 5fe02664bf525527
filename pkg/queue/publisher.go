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
	// ConfirmTimeout bounds the wait for the broker's confirm. Default 2s.
	ConfirmTimeout time.Duration
	// Now stamps published orders. Default time.Now.
	Now func() time.Time
	// Headers, when set, gives the headers of each order Publish sends,
	// from the publisher's context: the trace context (telemetry). Nil
	// adds none. In a batched message an order keeps its string-valued
	// headers only.
	Headers func(ctx context.Context) amqp.Table
	// InFlight is how many messages of Publish may wait for their confirm
	// at once; orders published meanwhile are coalesced (see coalesce.go).
	// Default 2.
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
		o.InFlight = 2
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
// the broker confirmed them. It keeps a small pool of confirm-mode
// channels: a caller holds one only while its publish frame is written,
// then waits for its own confirm while others publish on the same
// channel. A channel the broker closed is replaced on next use.
// Publisher is safe for concurrent use.
type Publisher struct {
	conn  *Conn
	topo  Topology
	opts  PublisherOptions
	slots chan *confirmChannel // nil entries are not opened yet
	co    coalescer

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
		slots: make(chan *confirmChannel, opts.Channels), closed: make(chan struct{})}
	for range opts.Channels {
		p.slots <- nil
	}
	return p
}

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
	// ErrConfirmTimeout: the message was written and no confirm came in
	// time (unknown: a memory alarm delays confirms, and the message is
	// enqueued once it lifts).
	ErrConfirmTimeout = errors.New("no confirm in time")
	// ErrConfirmLost: the channel closed after the message was written
	// and before its confirm (unknown).
	ErrConfirmLost = errors.New("channel closed before the confirm")
)

// Publish sends o as JSON to the order exchange: alone (MessageId = o.ID)
// or, when other publishes are waiting for their confirm, together with
// the orders that arrived meanwhile in one ContentTypeOrders message (see
// coalesce.go). It returns nil only once the broker acked the message
// holding o into a queue. A failure wraps order.ErrUnavailable when o is
// certainly in no queue (not written, nacked, returned, broker down or
// blocking) and order.ErrOutcomeUnknown when it may be (written, then no
// confirm in time, the channel lost, or ctx ended while waiting); an
// invalid order wraps order.ErrInvalid.
func (p *Publisher) Publish(ctx context.Context, o order.Order) error {
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
	pp := &pendingPublish{id: o.ID, body: body, done: make(chan error, 1)}
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
// Publish, with the same errors. Replays and retries use it.
func (p *Publisher) PublishRaw(ctx context.Context, exchange, routingKey string, msg amqp.Publishing) error {
	if err := p.publish(ctx, exchange, routingKey, msg); err != nil {
		return fmt.Errorf("publish to %s: %w", exchange, err)
	}
	return nil
}

func (p *Publisher) publish(ctx context.Context, exchange, routingKey string, msg amqp.Publishing) error {
	if err := msg.Headers.Validate(); err != nil {
		return fmt.Errorf("headers: %w", err)
	}
	cc, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	key := returnKey{msg.MessageId, exchange, routingKey}
	o := cc.expect(key)
	dc, err := cc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, true, false, msg)
	p.slots <- cc
	if err != nil {
		cc.forget(key, o)
		return writeFailed(err)
	}
	return p.awaitConfirm(ctx, cc, dc, key, o)
}

func (p *Publisher) awaitConfirm(ctx context.Context, cc *confirmChannel,
	dc *amqp.DeferredConfirmation, key returnKey, o *outstanding) error {
	timer := time.NewTimer(p.opts.ConfirmTimeout)
	defer timer.Stop()
	select {
	case <-dc.Done():
	case <-ctx.Done():
		go cc.settleLater(dc, key, o)
		return unknown(fmt.Errorf("waiting for confirm: %w", ctx.Err()))
	case <-timer.C:
		go cc.settleLater(dc, key, o)
		return unknown(fmt.Errorf("%w (%v)", ErrConfirmTimeout, p.opts.ConfirmTimeout))
	}
	cc.sync()
	returned, why := cc.forget(key, o)
	switch {
	case !dc.Acked() && cc.ch.IsClosed():
		return unknown(ErrConfirmLost)
	case !dc.Acked():
		return unavailable(ErrNacked)
	case returned:
		return unavailable(fmt.Errorf("%w: %s", ErrReturned, why))
	}
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
// it. The caller puts the slot back right after writing its publish.
func (p *Publisher) acquire(ctx context.Context) (*confirmChannel, error) {
	var cc *confirmChannel
	select {
	case cc = <-p.slots:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for a channel: %w", order.ErrUnavailable, ctx.Err())
	}
	select {
	case <-p.closed:
		p.slots <- cc
		return nil, fmt.Errorf("%w: publisher closed", order.ErrUnavailable)
	default:
	}
	if p.conn.Blocked() {
		p.slots <- cc
		return nil, unavailable(ErrBlocked)
	}
	if cc != nil && !cc.ch.IsClosed() {
		return cc, nil
	}
	if cc != nil {
		cc.close()
	}
	cc, err := openConfirmChannel(p.conn)
	if err != nil {
		p.slots <- nil
		if !errors.Is(err, order.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", order.ErrUnavailable, err)
		}
		return nil, err
	}
	return cc, nil
}

// Close closes the pooled channels; publishes still waiting for a confirm
// fail with order.ErrUnavailable. The connection stays open.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		for range p.opts.Channels {
			if cc := <-p.slots; cc != nil {
				cc.close()
			}
		}
		for range p.opts.Channels {
			p.slots <- nil
		}
	})
	return nil
}
