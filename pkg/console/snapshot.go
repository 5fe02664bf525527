package console

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// snapshots serves what a page shows from one build per interval, shared
// by every viewer: however many tabs poll the board, the engines see one
// read per interval. A viewer who asks while a build runs waits for that
// build (singleflight) instead of starting another; a viewer who asks
// within the interval after it gets the same result. Keys tell apart what
// differs between viewers (the board's search); entries older than the
// interval are dropped as new ones come, so the map stays small.
type snapshots[T any] struct {
	every time.Duration
	now   func() time.Time
	build func(ctx context.Context, key string) T
	// timeout bounds one build: it runs on behalf of every waiting viewer,
	// so no single viewer's cancellation cuts it short.
	timeout time.Duration

	group  singleflight.Group
	mu     sync.Mutex
	cache  map[string]snapshot[T]
	builds atomic.Int64
}

type snapshot[T any] struct {
	at time.Time
	v  T
}

func newSnapshots[T any](every time.Duration, now func() time.Time, build func(context.Context, string) T) *snapshots[T] {
	return &snapshots[T]{every: every, now: now, build: build, timeout: 3 * time.Second, cache: map[string]snapshot[T]{}}
}

// get returns key's snapshot, built at most every interval.
func (s *snapshots[T]) get(ctx context.Context, key string) T {
	if v, ok := s.fresh(key); ok {
		return v
	}
	ch := s.group.DoChan(key, func() (any, error) {
		if v, ok := s.fresh(key); ok {
			return v, nil // built by the flight that just ended
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		v := s.build(bctx, key)
		s.builds.Add(1)
		s.store(key, v)
		return v, nil
	})
	select {
	case r := <-ch:
		return r.Val.(T)
	case <-ctx.Done():
		var zero T
		return zero
	}
}

func (s *snapshots[T]) fresh(key string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[key]
	if !ok || s.now().Sub(e.at) >= s.every {
		var zero T
		return zero, false
	}
	return e.v, true
}

func (s *snapshots[T]) store(key string, v T) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.cache {
		if now.Sub(e.at) >= s.every {
			delete(s.cache, k)
		}
	}
	s.cache[key] = snapshot[T]{at: now, v: v}
}
