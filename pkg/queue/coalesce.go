package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/order"
)

// Coalescing (group commit) with a window. Publish queues its order; the
// orders queued are written as soon as fewer than PublisherOptions.InFlight
// messages of Publish are written and not yet settled by the broker, up to
// MaxBatch per message, without waiting for anything else: several
// messages wait for their confirms at once, and writing the next one does
// not wait for an earlier one's confirm. Only while the window is full do
// orders wait, and those that arrived meanwhile leave together in the next
// message when a confirm frees a place. Under light load a message carries
// one order and leaves at once (a plain single-order message,
// ContentTypeJSON); under load the broker handles one message, one confirm
// and one delivery for many orders.
//
// One goroutine at a time writes: Publish starts one when nobody writes
// and the window has room, and a confirm that frees a place while orders
// wait starts one too; it ends when nothing is left to write. A caller of
// Publish never writes itself: a write can block (a broker that stopped
// reading the socket), and the caller must return within its bound
// regardless. Confirms are taken by each channel's listener
// (confirmChannel), which answers the orders of the message it settles.
//
// Each order keeps its own outcome: its caller returns nil only once the
// broker confirmed the message that holds it; a nack or a return of that
// message fails exactly its orders, unavailable.
//
// Every order is answered within the publisher's bound (ConfirmTimeout,
// Publisher.Bound) of its Publish call, whatever it waits for:
//   - still queued at its deadline (the window stayed full, or no channel
//     could be had): withdrawn, unavailable (ErrNotWritten); one timer, the
//     reaper, fires for the oldest order queued;
//   - written: the message's deadline is its oldest order's, and the
//     channel's listener answers its orders unknown (ErrConfirmTimeout) if
//     no confirm came by then. The message keeps its place in the window
//     until the broker settles it or its channel closes, so while the
//     broker holds confirms back, the orders behind it are not written
//     only to be answered unknown: they are answered not taken.
//
// A caller whose ctx ends first returns unavailable while its order is
// still queued (withdrawn), and unknown once a writer took it.

// pendingPublish is one order waiting in the coalescing queue.
type pendingPublish struct {
	id      string
	body    []byte
	headers amqp.Table
	// deadline is the publish's call plus the bound: the order is
	// answered by then.
	deadline time.Time
	// done receives the order's outcome, once.
	done chan error
	// taken is set (under coalescer.mu) once the order left the queue: a
	// writer took it, or it was answered there.
	taken bool
}

// coalescer is the queue of orders not yet written and the window of
// messages written and not yet settled.
type coalescer struct {
	mu    sync.Mutex
	queue []*pendingPublish
	// inFlight counts the messages taken by a writer and not yet settled
	// by the broker (or failed): at most PublisherOptions.InFlight.
	inFlight int
	// writing is set while a goroutine writes the queue.
	writing bool
	closed  bool
	// reaper answers the queued orders whose deadline passed (Publisher.
	// reap); it is set to fire at armed, zero when it is not set.
	reaper *time.Timer
	armed  time.Time
}

// submit queues pp and, when nobody writes and the window has room,
// starts a writer.
func (p *Publisher) submit(pp *pendingPublish) {
	c := &p.co
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		pp.done <- fmt.Errorf("%w: publisher closed", order.ErrUnavailable)
		return
	}
	c.queue = append(c.queue, pp)
	if c.armed.IsZero() {
		c.armed = pp.deadline
		c.reaper.Reset(time.Until(pp.deadline))
	}
	write := !c.writing && c.inFlight < p.opts.InFlight
	if write {
		c.writing = true
	}
	c.mu.Unlock()
	if write {
		go p.writeQueued()
	}
}

// writeQueued writes batches while orders are queued and the window has
// room; it runs as the one writer and gives that role up on return.
func (p *Publisher) writeQueued() {
	for {
		batch, expired := p.take()
		answerAll(expired, p.notWritten)
		if batch == nil {
			return
		}
		p.writeBatch(batch)
	}
}

// take hands the writer the next batch and counts it in the window, or
// gives up the writing role (nil) when nothing is queued, the window is
// full or the publisher closed. Orders whose deadline passed are taken
// out apart (expired), to be answered not written.
func (p *Publisher) take() (batch, expired []*pendingPublish) {
	c := &p.co
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) > 0 {
		expired = c.cutExpiredLocked(time.Now())
	}
	if len(c.queue) == 0 || c.inFlight >= p.opts.InFlight || c.closed {
		c.writing = false
		if len(c.queue) == 0 {
			c.queue = nil // drops the backing array a burst grew
		}
		return nil, expired
	}
	c.inFlight++
	return c.cutLocked(min(len(c.queue), p.opts.MaxBatch)), expired
}

// cutLocked takes the first n orders out of the queue.
func (c *coalescer) cutLocked(n int) []*pendingPublish {
	out := make([]*pendingPublish, n)
	copy(out, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	for _, pp := range out {
		pp.taken = true
	}
	return out
}

// cutExpiredLocked takes out the orders at the head of the queue whose
// deadline is not after now. Deadlines grow along the queue (each is its
// call's time plus the same bound), but for calls racing to queue.
func (c *coalescer) cutExpiredLocked(now time.Time) []*pendingPublish {
	n := 0
	for n < len(c.queue) && !now.Before(c.queue[n].deadline) {
		n++
	}
	if n == 0 {
		return nil
	}
	return c.cutLocked(n)
}

// reap answers the queued orders whose deadline passed, not written, and
// sets the reaper for the next one.
func (p *Publisher) reap() {
	c := &p.co
	now := time.Now()
	c.mu.Lock()
	expired := c.cutExpiredLocked(now)
	c.armed = time.Time{}
	if len(c.queue) > 0 {
		c.armed = c.queue[0].deadline
		c.reaper.Reset(c.armed.Sub(now))
	}
	c.mu.Unlock()
	answerAll(expired, p.notWritten)
}

// answerAll gives every order of orders the outcome err.
func answerAll(orders []*pendingPublish, err error) {
	for _, pp := range orders {
		pp.done <- err
	}
}

// writeBatch writes one message holding batch, which its channel answers;
// a message that could not be written is answered here.
func (p *Publisher) writeBatch(batch []*pendingPublish) {
	m := &message{batch: batch, deadline: batch[0].deadline}
	for _, pp := range batch[1:] {
		if pp.deadline.Before(m.deadline) {
			m.deadline = pp.deadline
		}
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Timestamp: p.opts.Now()}
	if len(batch) == 1 {
		msg.ContentType, msg.MessageId, msg.Headers, msg.Body = ContentTypeJSON, batch[0].id, batch[0].headers, batch[0].body
	} else {
		body, err := appendBatch(make([]byte, 0, 32+len(batch)*(len(batch[0].body)+64)), batch)
		if err != nil {
			p.settled(m)
			answerAll(batch, unavailable(err)) // nothing was written
			return
		}
		msg.ContentType, msg.MessageId, msg.Body = ContentTypeOrders, "batch-"+ulid.Make().String(), body
	}
	m.key = returnKey{msg.MessageId, p.topo.Exchange, p.topo.RoutingKey}
	// The message belongs to no one caller: no caller's ctx bounds its
	// write; its deadline does.
	if err := p.write(context.Background(), p.topo.Exchange, p.topo.RoutingKey, msg, m); err != nil {
		p.settled(m)
		answerAll(batch, err)
	}
}

// settled frees m's place in the window: the broker settled it, its
// channel closed, or it was not written. Orders waiting for that place
// are then written by a new writer, unless one is writing.
func (p *Publisher) settled(m *message) {
	if p.opts.Sent != nil {
		p.opts.Sent(len(m.batch))
	}
	c := &p.co
	c.mu.Lock()
	c.inFlight--
	start := !c.writing && len(c.queue) > 0 && !c.closed
	if start {
		c.writing = true
	}
	c.mu.Unlock()
	if start {
		go p.writeQueued()
	}
}

// closeQueue answers every queued order unavailable and takes no more.
func (p *Publisher) closeQueue() {
	c := &p.co
	c.mu.Lock()
	c.closed = true
	queued := c.cutLocked(len(c.queue))
	c.reaper.Stop()
	c.armed = time.Time{}
	c.mu.Unlock()
	answerAll(queued, fmt.Errorf("%w: publisher closed", order.ErrUnavailable))
}

// withdraw removes pp from the queue if it is still there, and tells
// whether it was.
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
	pp.taken = true
	return true
}

// await waits for pp's outcome (given within the publisher's bound), or
// for the caller's ctx to end.
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
