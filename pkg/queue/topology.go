package queue

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Default names and limits (README, docs/API.md: operators and tools rely on the
// names).
const (
	DefaultExchange      = "orders"
	DefaultRoutingKey    = "order.created"
	DefaultQueue         = "orders.created"
	DefaultDeadExchange  = "orders.dlx"
	DefaultDeadQueue     = "orders.dead"
	DefaultRetryExchange = "orders.retry"
	DefaultDeliveryLimit = 20
	// DefaultDeadDeliveryLimit is the dead queue's delivery limit. Listing
	// the dead letters hands each one out and returns it; RabbitMQ 4.0 to
	// 4.2 count every return as a delivery against a quorum queue's limit,
	// 20 by default, and drop a letter past it. Set explicitly this high,
	// a letter survives a million listings.
	DefaultDeadDeliveryLimit = 1_000_000
)

// InequivalentError means a queue exists with other arguments than the
// ones declared (the broker answered PRECONDITION_FAILED).
type InequivalentError struct {
	Queue string
	Err   error
}

func (e *InequivalentError) Error() string {
	return fmt.Sprintf("queue %s exists with other arguments: %v", e.Queue, e.Err)
}

func (e *InequivalentError) Unwrap() error { return e.Err }

// DefaultRetryDelays are the retry tiers a failing order goes through
// before it is parked in the dead queue.
var DefaultRetryDelays = []time.Duration{time.Second, 10 * time.Second, 60 * time.Second}

// Topology names every exchange and queue of the order flow. A zero field
// means its default; tests set unique names. Code that reads the names
// takes a Topology built by NewTopology (pkg/config builds the services'
// one so), which has every field set; the functions of this package
// complete a partial one themselves. The gateway and the worker both call
// Declare at start-up, with the same values.
type Topology struct {
	// Exchange receives new orders (topic, durable). Default "orders".
	Exchange string
	// RoutingKey of a new order. Default "order.created".
	RoutingKey string
	// Queue is the work queue the worker consumes (quorum). Default
	// "orders.created".
	Queue string
	// DeadExchange is the fanout exchange dead letters go through.
	// Default "orders.dlx".
	DeadExchange string
	// DeadQueue parks dead letters for operations (quorum). Default
	// "orders.dead".
	DeadQueue string
	// RetryExchange is the direct exchange a retry is published to; each
	// tier queue is bound to it with its own name as the routing key, and
	// is named RetryExchange + "." + delay ("orders.retry.10s").
	// Default "orders.retry".
	RetryExchange string
	// RetryDelays lists the tiers in order: the n-th retry waits
	// RetryDelays[n-1]. Default 1s, 10s, 60s.
	RetryDelays []time.Duration
	// DeliveryLimit is the work queue's x-delivery-limit: a message the
	// worker never settles (it crashes on it) is dead-lettered by the
	// broker after this many deliveries. Default 20.
	DeliveryLimit int
	// DeadDeliveryLimit is the dead queue's x-delivery-limit. Default
	// DefaultDeadDeliveryLimit; negative declares none (a dead queue
	// declared before the limit was set, see DeclareOn).
	DeadDeliveryLimit int
}

// NewTopology returns t with every zero field set to its default, so that
// whoever reads its names (DeadQueue, RetryQueues, DiscardedQueue) sees
// the ones the services declare.
func NewTopology(t Topology) Topology {
	t.setDefaults()
	return t
}

func (t *Topology) setDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&t.Exchange, DefaultExchange)
	def(&t.RoutingKey, DefaultRoutingKey)
	def(&t.Queue, DefaultQueue)
	def(&t.DeadExchange, DefaultDeadExchange)
	def(&t.DeadQueue, DefaultDeadQueue)
	def(&t.RetryExchange, DefaultRetryExchange)
	if len(t.RetryDelays) == 0 {
		t.RetryDelays = append([]time.Duration(nil), DefaultRetryDelays...)
	}
	if t.DeliveryLimit == 0 {
		t.DeliveryLimit = DefaultDeliveryLimit
	}
	if t.DeadDeliveryLimit == 0 {
		t.DeadDeliveryLimit = DefaultDeadDeliveryLimit
	}
}

// validate rejects values the broker would accept but surge cannot use.
func (t Topology) validate() error {
	seen := map[string]bool{}
	for _, d := range t.RetryDelays {
		if d < time.Millisecond {
			return fmt.Errorf("retry delay %v: must be at least 1ms", d)
		}
		if seen[delayName(d)] {
			return fmt.Errorf("retry delay %v: listed twice", d)
		}
		seen[delayName(d)] = true
	}
	if t.DeliveryLimit < 1 {
		return fmt.Errorf("delivery limit %d: must be positive", t.DeliveryLimit)
	}
	return nil
}

// RetryQueues returns the names of the tier queues, in tier order.
func (t Topology) RetryQueues() []string {
	t.setDefaults()
	names := make([]string, len(t.RetryDelays))
	for i, d := range t.RetryDelays {
		names[i] = t.RetryExchange + "." + delayName(d)
	}
	return names
}

// delayName spells a delay the way operators read it: "1s", "60s",
// "200ms".
func delayName(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// quorumArgs are the arguments every queue of the flow shares: quorum
// type, and at-least-once dead-lettering, which RabbitMQ only honours with
// x-overflow reject-publish (RabbitMQ's quorum-queue dead-lettering).
func quorumArgs(deadExchange string) amqp.Table {
	return amqp.Table{
		"x-queue-type":           "quorum",
		"x-dead-letter-exchange": deadExchange,
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	}
}

// Declare creates the exchanges, queues and bindings if they are missing.
// It is idempotent; a queue that exists with different arguments makes
// the broker close ch with PRECONDITION_FAILED, reported as an error.
func (t Topology) Declare(ch *amqp.Channel) error {
	t.setDefaults()
	if err := t.validate(); err != nil {
		return fmt.Errorf("declare topology: %w", err)
	}
	exchanges := []struct{ name, kind string }{
		{t.Exchange, amqp.ExchangeTopic},
		{t.DeadExchange, amqp.ExchangeFanout},
		{t.RetryExchange, amqp.ExchangeDirect},
	}
	for _, x := range exchanges {
		if err := ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", x.name, err)
		}
	}
	// The dead queue has no dead-letter target and a delivery limit far
	// out of reach: listing it returns every message, which must never
	// drop one (DefaultDeadDeliveryLimit).
	dead := amqp.Table{"x-queue-type": "quorum"}
	if t.DeadDeliveryLimit > 0 {
		dead["x-delivery-limit"] = int64(t.DeadDeliveryLimit)
	}
	if err := declareBound(ch, t.DeadQueue, dead, t.DeadExchange, t.RoutingKey); err != nil {
		return err
	}
	if err := declareDiscarded(ch, t); err != nil {
		return err
	}
	work := quorumArgs(t.DeadExchange)
	work["x-delivery-limit"] = int64(t.DeliveryLimit)
	if err := declareBound(ch, t.Queue, work, t.Exchange, t.RoutingKey); err != nil {
		return err
	}
	for i, name := range t.RetryQueues() {
		// An expired retry goes back through the order exchange with the
		// order routing key, so it lands in the work queue again.
		args := quorumArgs(t.Exchange)
		args["x-dead-letter-routing-key"] = t.RoutingKey
		args["x-message-ttl"] = t.RetryDelays[i].Milliseconds()
		if err := declareBound(ch, name, args, t.RetryExchange, name); err != nil {
			return err
		}
	}
	return nil
}

func declareBound(ch *amqp.Channel, queue string, args amqp.Table, exchange, key string) error {
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
			return fmt.Errorf("declare queue %s: %w", queue, &InequivalentError{Queue: queue, Err: err})
		}
		return fmt.Errorf("declare queue %s: %w", queue, err)
	}
	if err := ch.QueueBind(queue, key, exchange, false, nil); err != nil {
		return fmt.Errorf("bind queue %s to %s: %w", queue, exchange, err)
	}
	return nil
}

// DeclareOn declares t on channels of conn (Declare). A dead queue that
// an earlier version declared without a delivery limit cannot be given
// one by a declaration (the broker refuses other arguments): it is kept
// as it is, and log says how to set the limit with a policy.
func (t Topology) DeclareOn(conn *Conn, log *slog.Logger) error {
	t.setDefaults()
	err := declareOnChannel(conn, t)
	var ie *InequivalentError
	if !errors.As(err, &ie) || ie.Queue != t.DeadQueue || t.DeadDeliveryLimit <= 0 {
		return err
	}
	log.Warn("the dead queue has no explicit delivery limit; RabbitMQ 4.0 to 4.2 would drop a letter listed 20 times: "+
		"rabbitmqctl set_policy --apply-to quorum_queues surge-dead-letters '^"+regexp.QuoteMeta(t.DeadQueue)+
		"$' '{\"delivery-limit\":"+strconv.Itoa(DefaultDeadDeliveryLimit)+"}'", "queue", t.DeadQueue)
	t.DeadDeliveryLimit = -1
	return declareOnChannel(conn, t)
}

func declareOnChannel(conn *Conn, t Topology) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel to declare topology: %w", err)
	}
	defer ch.Close()
	return t.Declare(ch)
}

// Delete removes every queue and exchange of t, messages included. Tests
// call it at cleanup; production code never does.
func (t Topology) Delete(ch *amqp.Channel) error {
	t.setDefaults()
	var errs []error
	queues := append([]string{t.Queue, t.DeadQueue, t.DiscardedQueue()}, t.RetryQueues()...)
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", q, err))
		}
	}
	for _, x := range []string{t.Exchange, t.DeadExchange, t.RetryExchange} {
		if err := ch.ExchangeDelete(x, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete exchange %s: %w", x, err))
		}
	}
	return errors.Join(errs...)
}
