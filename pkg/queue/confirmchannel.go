package queue

import (
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmChannel is one pooled channel in confirm mode. Many publishes are
// outstanding on it at once; each caller waits on its own
// DeferredConfirmation.
//
// A mandatory message the broker cannot route comes back as basic.return
// and is then ACKED, so the ack alone does not mean "queued". Returns
// carry no delivery tag: they are matched to publishes by (MessageId,
// exchange, routing key), first outstanding publish first, which is exact
// because the broker handles one channel's publishes in order. The return
// frame precedes the ack, and the library hands it to listen (an
// unbuffered channel) before it resolves the ack; sync then waits until
// listen has recorded it, so a caller woken by the ack never misses its
// own return.
type confirmChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	barrier chan chan struct{}
	done    chan struct{} // closed when the channel is closed

	mu      sync.Mutex
	waiting map[returnKey][]*outstanding
}

type returnKey struct{ messageID, exchange, routingKey string }

type outstanding struct {
	returned bool
	why      string
}

func openConfirmChannel(conn *Conn) (*confirmChannel, error) {
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
		barrier: make(chan chan struct{}),
		done:    make(chan struct{}),
		waiting: map[returnKey][]*outstanding{},
	}
	go cc.listen()
	return cc, nil
}

// listen records returns, and answers sync requests in between, until the
// library closes the returns channel with the AMQP channel.
func (cc *confirmChannel) listen() {
	defer close(cc.done)
	for {
		select {
		case r, ok := <-cc.returns:
			if !ok {
				return
			}
			cc.markReturned(r)
		case reply := <-cc.barrier:
			close(reply)
		}
	}
}

func (cc *confirmChannel) markReturned(r amqp.Return) {
	key := returnKey{r.MessageId, r.Exchange, r.RoutingKey}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, o := range cc.waiting[key] {
		if !o.returned {
			o.returned = true
			o.why = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
			return
		}
	}
}

// expect registers a publish about to be written; call it while holding
// the channel, so registration order is publish order.
func (cc *confirmChannel) expect(key returnKey) *outstanding {
	o := &outstanding{}
	cc.mu.Lock()
	cc.waiting[key] = append(cc.waiting[key], o)
	cc.mu.Unlock()
	return o
}

// forget drops a settled publish and tells whether it was returned.
func (cc *confirmChannel) forget(key returnKey, o *outstanding) (returned bool, why string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	list := cc.waiting[key]
	for i, x := range list {
		if x == o {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(cc.waiting, key)
	} else {
		cc.waiting[key] = list
	}
	return o.returned, o.why
}

// sync returns once listen has handled every return handed to it so far.
func (cc *confirmChannel) sync() {
	reply := make(chan struct{})
	select {
	case cc.barrier <- reply:
		<-reply
	case <-cc.done:
	}
}

// settleLater keeps an abandoned publish (its caller timed out) in the
// return bookkeeping until its confirm arrives, so a late return is not
// matched to a younger publish of the same message.
func (cc *confirmChannel) settleLater(dc *amqp.DeferredConfirmation, key returnKey, o *outstanding) {
	<-dc.Done()
	cc.sync()
	cc.forget(key, o)
}

// close releases the channel. An error only means the broker or the
// connection closed it first, which leaves nothing to release.
func (cc *confirmChannel) close() { _ = cc.ch.Close() }
