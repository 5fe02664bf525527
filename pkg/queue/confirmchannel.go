package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmChannel is one pooled channel in confirm mode. Many messages are
// outstanding on it at once; one goroutine, listen, settles them all: it
// takes the broker's returns and confirms as the library hands them over,
// and answers a message whose deadline passed first. Nothing else waits
// for a confirm, so no goroutine is parked per message or per order.
//
// Confirms name a message by its delivery tag, which the channel counts
// from 1 in publish order. A writer holds the channel (its pool slot) while
// it writes, so register gives each message the next tag before its frames
// go out, and the tags match the library's.
//
// A mandatory message the broker cannot route comes back as basic.return
// and is then ACKED, so the ack alone does not mean "queued". Returns
// carry no delivery tag: they are matched to messages by (MessageId,
// exchange, routing key), first outstanding message first, which is exact
// because the broker handles one channel's publishes in order. The library
// hands the return to listen (an unbuffered channel) before it reads the
// ack's frame, and listen handles one event at a time, so a message's
// return is recorded before its confirm is taken.
type confirmChannel struct {
	ch       *amqp.Channel
	returns  chan amqp.Return
	confirms chan amqp.Confirmation
	// done is closed once listen has settled every message, after the
	// library closed the channel.
	done chan struct{}
	// settled is told of each message of Publish the broker settled (or
	// whose channel closed), before its orders are answered: the
	// publisher's window.
	settled func(*message)
	// expired is the answer to a message whose deadline passed first.
	expired error

	mu sync.Mutex
	// tag is the delivery tag of the last message written.
	tag uint64
	// waiting holds the messages written and not settled by the broker,
	// in tag order, answered or not.
	waiting []*message
	// timer fires at armed, the earliest deadline of a message not yet
	// answered when it was set (zero when not set).
	timer *time.Timer
	armed time.Time
	// lost is set once the channel closed: nothing more is registered.
	lost bool
}

type returnKey struct{ messageID, exchange, routingKey string }

// message is one publish written on a confirm channel: a batch of orders
// of Publish, or one message of PublishRaw. Its fields but batch, done and
// deadline are guarded by the channel's mu.
type message struct {
	tag      uint64
	key      returnKey
	deadline time.Time
	// batch holds Publish's orders, each answered through its done.
	batch []*pendingPublish
	// done receives PublishRaw's outcome (buffered, one value).
	done chan error

	returned bool
	why      string
	// answered is set once the outcome was given: a message answered at
	// its deadline stays in waiting until the broker settles it, so that
	// a late return is not matched to a younger message.
	answered bool
}

// answer gives the message's outcome to its waiters. The caller set
// answered under the channel's mu, so it runs once per message.
func (m *message) answer(err error) {
	if m.batch == nil {
		m.done <- err
		return
	}
	for _, pp := range m.batch {
		pp.done <- err
	}
}

// errOpenTimeout says that a channel could not be opened within the time the
// publish had left: nothing was written.
var errOpenTimeout = errors.New("no channel opened in time")

// openConfirmChannel opens a channel in confirm mode, giving up at ctx's
// end: the broker answers channel.open and confirm.select, and while it
// does not (a stalled connection), the library would wait until the
// heartbeat closes the connection. A channel opened after ctx ended is
// handed to late (nil: closed).
func openConfirmChannel(ctx context.Context, conn *Conn, hooks channelHooks,
	late func(*confirmChannel)) (*confirmChannel, error) {
	type result struct {
		cc  *confirmChannel
		err error
	}
	res := make(chan result, 1)
	go func() {
		cc, err := openConfirmChannelNow(conn, hooks)
		res <- result{cc, err}
	}()
	select {
	case r := <-res:
		return r.cc, r.err
	case <-ctx.Done():
		go func() {
			r := <-res
			if late != nil {
				late(r.cc)
			} else if r.cc != nil {
				r.cc.close()
			}
		}()
		return nil, fmt.Errorf("%w: %w", errOpenTimeout, context.Cause(ctx))
	}
}

// channelHooks are what a confirm channel tells its publisher.
type channelHooks struct {
	settled func(*message)
	expired error
}

func openConfirmChannelNow(conn *Conn, hooks channelHooks) (*confirmChannel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	cc := &confirmChannel{
		ch:      ch,
		returns: ch.NotifyReturn(make(chan amqp.Return)),
		// The library blocks its reader on a full listener: room for
		// many confirms keeps it reading while listen answers.
		confirms: ch.NotifyPublish(make(chan amqp.Confirmation, 256)),
		done:     make(chan struct{}),
		settled:  hooks.settled,
		expired:  hooks.expired,
		timer:    time.NewTimer(time.Hour),
	}
	cc.timer.Stop()
	go cc.listen()
	return cc, nil
}

// listen settles the channel's messages until the library closes the
// channel, then settles what is left as lost.
func (cc *confirmChannel) listen() {
	defer close(cc.done)
	returns, confirms := cc.returns, cc.confirms
	for returns != nil || confirms != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			cc.markReturned(r)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			cc.confirm(c)
		case <-cc.timer.C:
			cc.expire()
		}
	}
	cc.timer.Stop()
	cc.loseAll()
}

// register adds m as the next message written on the channel, before its
// write; the caller holds the channel. It fails once the channel is lost.
func (cc *confirmChannel) register(m *message) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.lost {
		return amqp.ErrClosed
	}
	m.tag = cc.tag + 1
	cc.tag++
	cc.waiting = append(cc.waiting, m)
	if cc.armed.IsZero() || m.deadline.Before(cc.armed) {
		cc.armed = m.deadline
		cc.timer.Reset(time.Until(m.deadline))
	}
	return nil
}

// unregister takes back m, whose write failed (the library did not count
// it), and tells whether it was still there to take: a channel lost
// meanwhile settled it already.
func (cc *confirmChannel) unregister(m *message) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i, x := range cc.waiting {
		if x == m {
			cc.waiting = append(cc.waiting[:i], cc.waiting[i+1:]...)
			cc.tag--
			return true
		}
	}
	return false
}

func (cc *confirmChannel) markReturned(r amqp.Return) {
	key := returnKey{r.MessageId, r.Exchange, r.RoutingKey}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, m := range cc.waiting {
		if m.key == key && !m.returned {
			m.returned = true
			m.why = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
			return
		}
	}
}

// confirm settles the message the broker acked or nacked. The library
// hands confirms over one tag at a time, in tag order.
func (cc *confirmChannel) confirm(c amqp.Confirmation) {
	cc.mu.Lock()
	var m *message
	for i, x := range cc.waiting {
		if x.tag == c.DeliveryTag {
			m = x
			cc.waiting = append(cc.waiting[:i], cc.waiting[i+1:]...)
			break
		}
	}
	if m == nil {
		cc.mu.Unlock()
		return
	}
	if len(cc.waiting) == 0 {
		cc.timer.Stop()
		cc.armed = time.Time{}
	}
	first := !m.answered
	m.answered = true
	returned, why := m.returned, m.why
	cc.mu.Unlock()
	var err error
	switch {
	case !c.Ack:
		err = unavailable(ErrNacked)
	case returned:
		err = unavailable(fmt.Errorf("%w: %s", ErrReturned, why))
	}
	cc.finish(m, first, err)
}

// finish tells the publisher's window that m left the channel, and
// answers m when it was not answered at its deadline.
func (cc *confirmChannel) finish(m *message, answer bool, err error) {
	if m.batch != nil && cc.settled != nil {
		cc.settled(m)
	}
	if answer {
		m.answer(err)
	}
}

// expire answers the messages whose deadline passed, unknown (they were
// written), and arms the timer for the next deadline.
func (cc *confirmChannel) expire() {
	now := time.Now()
	var due []*message
	cc.mu.Lock()
	next := time.Time{}
	for _, m := range cc.waiting {
		switch {
		case m.answered:
		case !now.Before(m.deadline):
			m.answered = true
			due = append(due, m)
		case next.IsZero() || m.deadline.Before(next):
			next = m.deadline
		}
	}
	cc.armed = next
	if !next.IsZero() {
		cc.timer.Reset(next.Sub(now))
	}
	cc.mu.Unlock()
	for _, m := range due {
		m.answer(cc.expired)
	}
}

// loseAll settles every message still waiting once the channel closed:
// written, and no confirm will come (unknown).
func (cc *confirmChannel) loseAll() {
	cc.mu.Lock()
	cc.lost = true
	waiting := cc.waiting
	cc.waiting = nil
	answer := make([]bool, len(waiting))
	for i, m := range waiting {
		answer[i] = !m.answered
		m.answered = true
	}
	cc.mu.Unlock()
	for i, m := range waiting {
		cc.finish(m, answer[i], unknown(ErrConfirmLost))
	}
}

// usable tells whether the channel can take a message.
func (cc *confirmChannel) usable() bool {
	if cc.ch.IsClosed() {
		return false
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return !cc.lost
}

// close releases the channel; listen then settles what is outstanding as
// lost. An error only means the broker or the connection closed it first,
// which leaves nothing to release.
func (cc *confirmChannel) close() { _ = cc.ch.Close() }
