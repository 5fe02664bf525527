package ceiling

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQPOptions tune the publish ceiling. The zero value means the defaults.
type AMQPOptions struct {
	// Queue is the quorum queue published to; it is declared, and deleted
	// afterwards. Required: use a name no one else uses.
	Queue string
	// Channels publish concurrently on one connection. Default 8.
	Channels int
	// Window is how many publishes each channel keeps awaiting their
	// confirm. Default 128.
	Window int
	// BodySize is the message size in bytes. Default 160 (an order).
	BodySize int
	// Duration of the measurement. Default 3s.
	Duration time.Duration
}

func (o *AMQPOptions) setDefaults() {
	if o.Channels == 0 {
		o.Channels = 8
	}
	if o.Window == 0 {
		o.Window = 128
	}
	if o.BodySize == 0 {
		o.BodySize = 160
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
}

func (o AMQPOptions) validate() error {
	if o.Queue == "" {
		return fmt.Errorf("amqp ceiling: a queue name is required")
	}
	return nil
}

// AMQPConfirmed measures persistent publishes to a quorum queue, counted
// once the broker confirmed them, with Window confirms outstanding on each
// of Channels channels: the most confirmed publishes per second the broker
// gives one connection.
func AMQPConfirmed(ctx context.Context, url string, opts AMQPOptions) (Result, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "surge-ceiling"}})
	if err != nil {
		return Result{}, fmt.Errorf("amqp ceiling: dial: %w", err)
	}
	defer conn.Close()
	admin, err := conn.Channel()
	if err != nil {
		return Result{}, fmt.Errorf("amqp ceiling: open channel: %w", err)
	}
	if _, err := admin.QueueDeclare(opts.Queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return Result{}, fmt.Errorf("amqp ceiling: declare %s: %w", opts.Queue, err)
	}
	defer func() { _, _ = admin.QueueDelete(opts.Queue, false, false, false) }()
	chans := make([]*publisher, opts.Channels)
	for i := range chans {
		if chans[i], err = newPublisher(conn, opts); err != nil {
			return Result{}, err
		}
	}
	res, err := drive(ctx, "amqp_confirmed_publish", opts.Channels, opts.Duration, func(ctx context.Context, w int, _ int64) (int, error) {
		return chans[w].publish(ctx)
	})
	for _, p := range chans {
		if _, werr := p.drain(); werr != nil && err == nil {
			err = werr
		}
	}
	res.Setup = fmt.Sprintf("persistent %d-byte messages to a quorum queue, %d channels x %d confirms in flight",
		opts.BodySize, opts.Channels, opts.Window)
	return res, err
}

// publisher is one confirm-mode channel with a window of outstanding
// publishes.
type publisher struct {
	ch      *amqp.Channel
	queue   string
	msg     amqp.Publishing
	window  int
	pending []*amqp.DeferredConfirmation
}

func newPublisher(conn *amqp.Connection, opts AMQPOptions) (*publisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("amqp ceiling: open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqp ceiling: enable confirms: %w", err)
	}
	body := make([]byte, opts.BodySize)
	for i := range body {
		body[i] = 'x'
	}
	return &publisher{ch: ch, queue: opts.Queue, window: opts.Window,
		msg: amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body}}, nil
}

// publish sends one message, first settling the oldest when the window is
// full; it returns how many publishes were confirmed meanwhile.
func (p *publisher) publish(ctx context.Context) (int, error) {
	confirmed := 0
	if len(p.pending) >= p.window {
		ok, err := p.pending[0].WaitContext(ctx)
		if err != nil {
			return 0, fmt.Errorf("wait for confirm: %w", err)
		}
		if !ok {
			return 0, fmt.Errorf("broker nacked a publish")
		}
		p.pending = p.pending[1:]
		confirmed = 1
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", p.queue, false, false, p.msg)
	if err != nil {
		return confirmed, fmt.Errorf("publish: %w", err)
	}
	p.pending = append(p.pending, dc)
	return confirmed, nil
}

// drain waits for the publishes still in flight (they are not counted:
// the measurement ended before they were confirmed).
func (p *publisher) drain() (int, error) {
	n := 0
	for _, dc := range p.pending {
		if dc.Wait() {
			n++
		}
	}
	p.pending = nil
	if err := p.ch.Close(); err != nil {
		return n, fmt.Errorf("amqp ceiling: close channel: %w", err)
	}
	return n, nil
}
