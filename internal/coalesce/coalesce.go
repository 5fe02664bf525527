// Package coalesce gathers concurrent requests per key into batches for
// one sender: a key with no send in flight is sent at once, and the
// values added while one is in flight go together in the next, at most
// Max per send. So a value waits for at most one send ahead of its own,
// and a busy key costs one send per round trip instead of one per value.
// stock.Committer (Redis commits per SKU) and lock.Group (order locks per
// SKU) are built on it.
package coalesce

import "sync"

// Coalescer batches values per key for its send func, which it calls from
// one goroutine per key at a time (a key's sends never overlap; different
// keys' run in parallel).
type Coalescer[T any] struct {
	max  int
	send func(key string, batch []T)

	mu sync.Mutex
	// queued holds, per key with a send in flight, the values waiting for
	// the next one; a key absent has no send in flight.
	queued map[string][]T
}

// New returns a Coalescer sending at most limit values at a time (at
// least one) to send.
func New[T any](limit int, send func(key string, batch []T)) *Coalescer[T] {
	return &Coalescer[T]{max: max(limit, 1), send: send, queued: map[string][]T{}}
}

// Add queues v for key's next send, starting one when none is in flight.
// It does not wait for the send.
func (c *Coalescer[T]) Add(key string, v T) {
	c.mu.Lock()
	waiting, busy := c.queued[key]
	c.queued[key] = append(waiting, v)
	c.mu.Unlock()
	if !busy {
		go c.drain(key)
	}
}

// drain sends key's queued values until none is left.
func (c *Coalescer[T]) drain(key string) {
	for {
		c.mu.Lock()
		batch := c.queued[key]
		if len(batch) == 0 {
			delete(c.queued, key)
			c.mu.Unlock()
			return
		}
		n := min(len(batch), c.max)
		c.queued[key] = batch[n:]
		c.mu.Unlock()
		c.send(key, batch[:n])
	}
}
