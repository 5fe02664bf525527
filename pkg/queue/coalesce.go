package queue

import (
	"context"
	"fmt"
	"sync"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Coalescing (group commit). Publish does not write its order itself: it
// queues it, and a sender writes what is queued as one message. At most
// PublisherOptions.InFlight messages of Publish wait for their confirm at
// once; the orders that arrive meanwhile wait in the queue and leave
// together, up to MaxBatch per message, as soon as a confirm comes back.
// Under light load a message carries one order and leaves at once (a
// plain single-order message, ContentTypeJSON); under load the broker
// handles one message, one confirm and one delivery for many orders.
//
// Each order keeps its own outcome: its caller returns nil only once the
// broker confirmed the message that holds it; a nack or a return of that
// message fails exactly its orders, unavailable. The confirm deadline
// (ConfirmTimeout) runs from the message's write, as it did for one order
// per message: past it, the sender answers each of the message's orders
// unknown. A caller whose ctx ends first returns unavailable while its
// order is still queued (nothing was written: it is withdrawn), and
// unknown once a sender took it. While the broker stalls, an order may
// wait in the queue behind the messages whose confirms are late, up to
// ConfirmTimeout for each round of InFlight messages ahead of it.

// pendingPublish is one order waiting in the coalescing queue.
type pendingPublish struct {
	id      string
	body    []byte
	headers amqp.Table
	// done receives the outcome of the message holding the order.
	done chan error
	// taken is set (under coalescer.mu) once a sender took it.
	taken bool
}

// coalescer is the queue of orders not yet written and the count of
// senders running.
type coalescer struct {
	mu      sync.Mutex
	queue   []*pendingPublish
	senders int
}

// submit queues pp and starts a sender if fewer than limit run.
func (p *Publisher) submit(pp *pendingPublish) {
	c := &p.co
	c.mu.Lock()
	c.queue = append(c.queue, pp)
	start := c.senders < p.opts.InFlight
	if start {
		c.senders++
	}
	c.mu.Unlock()
	if start {
		go p.send()
	}
}

// withdraw removes pp from the queue if no sender took it yet, and tells
// whether it did.
func (p *Publisher) withdraw(pp *pendingPublish) bool {
	c := &p.co
	c.mu.Lock()
	defer c.mu.Unlock()
	if pp.taken {
		return false
	}
	for i, x := range c.queue {
		if x == pp {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			break
		}
	}
	return true
}

// take hands the next batch to a sender, or retires the sender when the
// queue is empty.
func (p *Publisher) take() []*pendingPublish {
	c := &p.co
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), p.opts.MaxBatch)
	if n == 0 {
		c.senders--
		c.queue = nil // drops the backing array a burst grew
		return nil
	}
	batch := make([]*pendingPublish, n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	for _, pp := range batch {
		pp.taken = true
	}
	return batch
}

// send writes batches until the queue is empty, each after the previous
// one's confirm.
func (p *Publisher) send() {
	for batch := p.take(); batch != nil; batch = p.take() {
		err := p.sendBatch(batch)
		if p.opts.Sent != nil {
			p.opts.Sent(len(batch))
		}
		for _, pp := range batch {
			pp.done <- err
		}
	}
}

// sendBatch publishes one message holding batch and waits for its
// confirm (bounded by ConfirmTimeout), with Publish's error classes.
func (p *Publisher) sendBatch(batch []*pendingPublish) error {
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Timestamp: p.opts.Now()}
	if len(batch) == 1 {
		msg.ContentType, msg.MessageId, msg.Headers, msg.Body = ContentTypeJSON, batch[0].id, batch[0].headers, batch[0].body
	} else {
		body, err := appendBatch(make([]byte, 0, 32+len(batch)*(len(batch[0].body)+64)), batch)
		if err != nil {
			return unavailable(err) // nothing was written
		}
		msg.ContentType, msg.MessageId, msg.Body = ContentTypeOrders, "batch-"+ulid.Make().String(), body
	}
	// The message belongs to no one caller: no caller's ctx bounds its
	// write; awaitConfirm bounds the wait for its confirm.
	return p.publish(context.Background(), p.topo.Exchange, p.topo.RoutingKey, msg)
}

// await waits for pp's outcome (the sender gives one at most
// ConfirmTimeout after the write), or for the caller's ctx to end.
func (p *Publisher) await(ctx context.Context, pp *pendingPublish) error {
	var cause error
	select {
	case err := <-pp.done:
		return err
	case <-ctx.Done():
		cause = fmt.Errorf("waiting for confirm: %w", ctx.Err())
	}
	if p.withdraw(pp) {
		return unavailable(fmt.Errorf("not written: %w", cause))
	}
	select {
	case err := <-pp.done: // settled meanwhile: the truth beats unknown
		return err
	default:
	}
	return unknown(cause)
}
