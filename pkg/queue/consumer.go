package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Handler processes one delivery and settles it with exactly one of Ack,
// Retry or Dead before returning. A handler that returns without settling,
// or panics, gets its delivery retried.
type Handler func(ctx context.Context, d *Delivery)

// ConsumerOptions configures a Consumer. The zero value means the
// defaults.
type ConsumerOptions struct {
	// Prefetch is how many unacked deliveries the broker pushes ahead.
	// Default 64.
	Prefetch int
	// Concurrency is how many handlers run at once. Default 16.
	Concurrency int
	// DrainTimeout is how long in-flight handlers may run after Run's
	// context ends before their own context is cancelled. Default 30s.
	DrainTimeout time.Duration
	// Logger receives connection losses and handler panics. Default
	// slog.Default().
	Logger *slog.Logger
	// Now stamps failure headers. Default time.Now.
	Now func() time.Time
}

func (o *ConsumerOptions) setDefaults() {
	if o.Prefetch == 0 {
		o.Prefetch = 64
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// validate rejects what the broker or the handler pool cannot use.
func (o ConsumerOptions) validate() error {
	if o.Prefetch < 1 || o.Prefetch > 65535 || o.Concurrency < 1 {
		return fmt.Errorf("prefetch %d, concurrency %d: need prefetch 1-65535 and concurrency >= 1",
			o.Prefetch, o.Concurrency)
	}
	return nil
}

// Consumer consumes the work queue with a bounded pool of handlers,
// re-subscribing after a connection loss (the broker redelivers what was
// unacked, so handlers must be idempotent by order id).
type Consumer struct {
	conn *Conn
	topo Topology
	opts ConsumerOptions

	// subscribed is true while a subscription to the work queue is
	// active; downSince (Unix nanoseconds, opts.Now) is when the last one
	// ended, or when the consumer was built.
	subscribed atomic.Bool
	downSince  atomic.Int64
}

// NewConsumer builds a consumer of topo's work queue.
func NewConsumer(conn *Conn, topo Topology, opts ConsumerOptions) *Consumer {
	opts.setDefaults()
	topo.setDefaults()
	c := &Consumer{conn: conn, topo: topo, opts: opts}
	c.downSince.Store(opts.Now().UnixNano())
	return c
}

// ErrNotConsuming is Health's answer for a consumer that has had no
// subscription for longer than it allows.
var ErrNotConsuming = errors.New("not consuming")

// Health returns nil while the consumer holds a subscription to the work
// queue, or has lost it for at most maxDown; after that, an error
// wrapping ErrNotConsuming. Run re-subscribes by itself after a lost
// channel or connection, so a short gap is normal (a broker failover);
// one that lasts means the process runs but will process no order (a
// queue deleted, permissions revoked, a broker that never comes back), and
// a liveness probe built on this restarts it.
func (c *Consumer) Health(maxDown time.Duration) error {
	if c.subscribed.Load() {
		return nil
	}
	down := c.opts.Now().Sub(time.Unix(0, c.downSince.Load()))
	if down <= maxDown {
		return nil
	}
	return fmt.Errorf("%w: no subscription to %s for %s (more than %s)", ErrNotConsuming, c.topo.Queue,
		down.Round(time.Millisecond), maxDown)
}

// setSubscribed records a subscription starting or ending.
func (c *Consumer) setSubscribed(on bool) {
	if !on {
		c.downSince.Store(c.opts.Now().UnixNano())
	}
	c.subscribed.Store(on)
}

// Run consumes until ctx ends, then stops intake (cancels the
// subscription), lets in-flight handlers finish, closes its channel (the
// broker requeues prefetched messages no handler took) and returns nil.
// Connection losses are waited out. It returns an error for an unusable
// configuration, or (after draining) once conn is closed (ErrClosed).
func (c *Consumer) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("run consumer: need a handler")
	}
	if err := c.opts.validate(); err != nil {
		return fmt.Errorf("run consumer: %w", err)
	}
	if err := c.topo.validate(); err != nil {
		return fmt.Errorf("run consumer: %w", err)
	}
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	s := &settler{pub: newPublisher(c.conn, c.topo, PublisherOptions{Channels: 4}),
		topo: c.topo, tiers: c.topo.RetryQueues(), now: c.opts.Now, ctx: hctx, log: c.opts.Logger}
	defer s.pub.Close()

	jobs := make(chan *Delivery)
	var wg sync.WaitGroup
	for range c.opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				c.handle(hctx, h, d)
			}
		}()
	}
	last, err := c.consume(ctx, jobs, s)
	close(jobs)
	c.drain(&wg, cancelHandlers)
	if last != nil {
		_ = last.Close()
	}
	if err != nil {
		return fmt.Errorf("run consumer: %w", err)
	}
	return nil
}

// consume runs subscriptions until ctx ends (or the Conn is closed) and
// returns the last channel, still open so that in-flight handlers can
// settle on it.
func (c *Consumer) consume(ctx context.Context, jobs chan<- *Delivery, s *settler) (*amqp.Channel, error) {
	backoff := 100 * time.Millisecond
	for {
		ch, delivered, err := c.session(ctx, jobs, s)
		if ctx.Err() != nil {
			return ch, nil
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		if delivered {
			backoff = 100 * time.Millisecond
		}
		c.opts.Logger.Warn("consumer subscription ended, resubscribing",
			"queue", c.topo.Queue, "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session subscribes on a fresh channel and hands deliveries to the
// handlers. On ctx end it cancels the subscription and returns the open
// channel; on any other end it closes the channel and returns why.
func (c *Consumer) session(ctx context.Context, jobs chan<- *Delivery, s *settler) (*amqp.Channel, bool, error) {
	ch, err := c.conn.awaitChannel(ctx)
	if err != nil {
		return nil, false, err
	}
	fail := func(err error) (*amqp.Channel, bool, error) {
		_ = ch.Close()
		return nil, false, err
	}
	if err := ch.Qos(c.opts.Prefetch, 0, false); err != nil {
		return fail(fmt.Errorf("set prefetch: %w", err))
	}
	tag := "surge-" + ulid.Make().String()
	deliveries, err := ch.Consume(c.topo.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return fail(fmt.Errorf("consume %s: %w", c.topo.Queue, err))
	}
	c.setSubscribed(true)
	defer c.setSubscribed(false)
	delivered := false
	for {
		select {
		case <-ctx.Done():
			_ = ch.Cancel(tag, false)
			return ch, delivered, nil
		case raw, ok := <-deliveries:
			if !ok {
				_ = ch.Close()
				return nil, delivered, errors.New("subscription cancelled or channel closed")
			}
			delivered = true
			for _, d := range deliveriesOf(raw, s) {
				select {
				case jobs <- d:
				case <-ctx.Done():
					// raw stays unacked (an order of a batch not handed
					// out never settles it); closing the channel
					// requeues it.
					_ = ch.Cancel(tag, false)
					return ch, delivered, nil
				}
			}
		}
	}
}

// drain waits for the handlers, cancelling their context after
// DrainTimeout.
func (c *Consumer) drain(wg *sync.WaitGroup, cancelHandlers context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(c.opts.DrainTimeout):
		c.opts.Logger.Warn("handlers still running after drain timeout, cancelling them",
			"timeout", c.opts.DrainTimeout)
		cancelHandlers()
		<-done
	}
}

// handle calls h and retries a delivery that h left unsettled or
// panicked on.
func (c *Consumer) handle(ctx context.Context, h Handler, d *Delivery) {
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("%v", r)
			}
			c.opts.Logger.Error("order handler panicked", "message_id", d.MessageID,
				"panic", err, "stack", string(debug.Stack()))
			c.settleLeftover(d, fmt.Errorf("handler panic: %w", err))
		}
	}()
	h(ctx, d)
	c.settleLeftover(d, errors.New("handler returned without settling the delivery"))
}

func (c *Consumer) settleLeftover(d *Delivery, cause error) {
	if d.settled.Load() {
		return
	}
	if err := d.Retry(cause); err != nil && !errors.Is(err, ErrAlreadySettled) {
		c.opts.Logger.Error("retry of an unsettled delivery failed", "message_id", d.MessageID, "error", err)
	}
}
