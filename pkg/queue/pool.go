package queue

import "sync"

// channelPool holds the publisher's confirm channels, each in a slot a
// writer holds while it writes. A slot taken is the one given back last:
// the channel just used, open and with messages in flight, rather than one
// not opened yet (whose opening waits on the broker). So one channel
// carries the publisher's stream while it serves, the broker settles its
// messages in order, and often several with one ack; the other slots fill
// only while writers overlap (PublishRaw's callers).
type channelPool struct {
	// tokens holds one value per free slot: a writer takes one before it
	// takes a slot, and waits on it when every slot is taken.
	tokens chan struct{}

	mu   sync.Mutex
	free []*confirmChannel // nil entries are not opened yet
}

func newChannelPool(size int) *channelPool {
	p := &channelPool{tokens: make(chan struct{}, size), free: make([]*confirmChannel, size)}
	for range size {
		p.tokens <- struct{}{}
	}
	return p
}

// pop takes the slot given back last; the caller holds a token.
func (p *channelPool) pop() *confirmChannel {
	p.mu.Lock()
	defer p.mu.Unlock()
	cc := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return cc
}

// put gives a slot back, with its channel (nil: none open), and its token.
func (p *channelPool) put(cc *confirmChannel) {
	p.mu.Lock()
	p.free = append(p.free, cc)
	p.mu.Unlock()
	p.tokens <- struct{}{}
}
