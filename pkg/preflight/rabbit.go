package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/queue"
)

// RabbitOptions locates the broker and names the topology.
type RabbitOptions struct {
	URL string
	// Topology names what is checked; zero fields mean the services'
	// defaults (queue.NewTopology).
	Topology queue.Topology
	// Timeout bounds the RabbitMQ part. Default 10s (also for a negative
	// value).
	Timeout time.Duration
}

// RabbitFacts is what the broker said.
type RabbitFacts struct {
	// Err is set when the broker could not be reached.
	Err error
	// Missing lists exchanges and queues of the topology that do not exist.
	Missing []string
	// Mismatch is the broker's refusal of the topology's declaration
	// (PRECONDITION_FAILED names the inequivalent argument: durable,
	// x-queue-type, ...); nil when every queue is as declared.
	Mismatch error
	// Depth is the ready messages and consumers of each queue.
	Depth map[string][2]int
	// Work and Dead name the work and dead-letter queues.
	Work, Dead string
}

func (o *RabbitOptions) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	o.Topology = queue.NewTopology(o.Topology)
}

// GatherRabbit checks that every exchange and queue exists (passive
// declares, which create nothing), then declares the topology with the
// arguments the services use: the broker refuses it when a queue exists
// with another durability or type. Nothing missing is ever created.
func GatherRabbit(ctx context.Context, opts RabbitOptions) RabbitFacts {
	opts.setDefaults()
	topo := opts.Topology
	f := RabbitFacts{Depth: map[string][2]int{}, Work: topo.Queue, Dead: topo.DeadQueue}
	// SURGE_AMQP_URL may list a cluster's nodes: the first that answers.
	var conn *amqp.Connection
	var err error
	for _, u := range queue.SplitURLs(opts.URL) {
		if conn, err = amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(opts.Timeout)}); err == nil {
			break
		}
	}
	if conn == nil {
		f.Err = err
		if f.Err == nil {
			f.Err = fmt.Errorf("SURGE_AMQP_URL names no broker")
		}
		return f
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		gatherTopology(conn, topo, &f)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		f.Err = ctx.Err()
	case <-time.After(opts.Timeout):
		f.Err = fmt.Errorf("no answer within %v", opts.Timeout)
	}
	return f
}

func gatherTopology(conn *amqp.Connection, topo queue.Topology, f *RabbitFacts) {
	for _, x := range []string{topo.Exchange, topo.DeadExchange, topo.RetryExchange} {
		if err := passive(conn, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclarePassive(x, "", true, false, false, false, nil)
		}); err != nil {
			f.Missing = append(f.Missing, "exchange "+x)
		}
	}
	for _, q := range append([]string{topo.Queue, topo.DeadQueue}, topo.RetryQueues()...) {
		err := passive(conn, func(ch *amqp.Channel) error {
			st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			f.Depth[q] = [2]int{st.Messages, st.Consumers}
			return err
		})
		if err != nil {
			delete(f.Depth, q)
			f.Missing = append(f.Missing, "queue "+q)
		}
	}
	if len(f.Missing) > 0 {
		return
	}
	f.Mismatch = passive(conn, topo.Declare)
}

// passive runs fn on a fresh channel: a refused declare closes its channel.
func passive(conn *amqp.Connection, fn func(*amqp.Channel) error) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return fn(ch)
}

// CheckRabbit checks the gathered broker facts.
func CheckRabbit(f RabbitFacts) Result {
	switch {
	case f.Err != nil:
		return failf(ItemQueues, "start RabbitMQ or fix SURGE_AMQP_URL", "RabbitMQ unreachable: %v", f.Err)
	case len(f.Missing) > 0:
		return failf(ItemQueues, "start the gateway or the worker once: both declare the topology",
			"missing: %s", strings.Join(f.Missing, ", "))
	case f.Mismatch != nil:
		var ae *amqp.Error
		msg := f.Mismatch.Error()
		if errors.As(f.Mismatch, &ae) {
			msg = ae.Reason
		}
		return failf(ItemQueues, "delete the queue when it is drained and let the services declare it again (durable quorum queue)",
			"a queue differs from the topology: %s", msg)
	}
	detail := fmt.Sprintf("every queue durable and quorum; %s holds %d ready with %d consumer(s)", f.Work, f.Depth[f.Work][0], f.Depth[f.Work][1])
	if dead := f.Depth[f.Dead][0]; dead > 0 {
		return Result{Item: ItemQueues, Status: Warn, Detail: fmt.Sprintf("%s; %d dead letter(s) in %s", detail, dead, f.Dead),
			Fix: "inspect and replay them: opsctl dlq list"}
	}
	return Result{Item: ItemQueues, Status: Pass, Detail: detail}
}
