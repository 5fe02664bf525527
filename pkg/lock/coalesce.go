package lock

import "sync"

// coalescer gathers values per key for one sender: a key with no send in
// flight is sent at once, the values added while one is in flight go
// together in the next, at most max per send.
type coalescer[T any] struct {
	max  int
	send func(key string, batch []T)

	mu sync.Mutex
	// queued holds, per key with a send in flight, the values waiting for
	// the next one; a key absent has no send in flight.
	queued map[string][]T
}

func newCoalescer[T any](max int, send func(string, []T)) *coalescer[T] {
	return &coalescer[T]{max: max, send: send, queued: map[string][]T{}}
}

func (c *coalescer[T]) add(key string, v T) {
	c.mu.Lock()
	waiting, busy := c.queued[key]
	c.queued[key] = append(waiting, v)
	c.mu.Unlock()
	if !busy {
		go c.drain(key)
	}
}

// drain sends key's queued values until none is left.
func (c *coalescer[T]) drain(key string) {
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
