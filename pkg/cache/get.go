package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Get returns id's value: from Redis when cached, else from the loader,
// once across all processes. A stale value (or one drawn for early
// refresh) is returned at once while a background rebuild replaces it.
// With no value at all, Get waits for the one rebuild up to
// Options.Wait, then fails with ErrBusy. Unknown ids fail with
// ErrNotFound.
func (c *Cache) Get(ctx context.Context, id string) ([]byte, error) {
	e, err := c.read(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.opts.OnGet != nil {
		c.opts.OnGet(e.present)
	}
	if !e.present {
		if e, err = c.fill(ctx, id); err != nil {
			return nil, err
		}
	}
	if now := c.opts.Now(); !now.Before(e.expiry) || c.early(e, now) {
		c.refresh(id, e.version)
	}
	if e.miss {
		return nil, fmt.Errorf("cache %s %s: %w", c.opts.Namespace, id, ErrNotFound)
	}
	return e.value, nil
}

// fill gets a missing entry: the callers of one process share one wait or
// rebuild, which does not end with the first caller's context.
func (c *Cache) fill(ctx context.Context, id string) (entry, error) {
	ch := c.flight.DoChan(id, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Wait+c.opts.LeaseTTL)
		defer cancel()
		return c.waitOrRebuild(fctx, id)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return entry{}, r.Err
		}
		return r.Val.(entry), nil
	case <-ctx.Done():
		return entry{}, fmt.Errorf("get cache %s %s: %w", c.opts.Namespace, id, context.Cause(ctx))
	}
}

// waitOrRebuild rebuilds id when it can take the lease, and otherwise
// polls for the value another process is rebuilding. Each poll tries the
// lease again, so a rebuilder that died is replaced once its lease ends.
func (c *Cache) waitOrRebuild(ctx context.Context, id string) (entry, error) {
	token := newToken()
	deadline := time.NewTimer(c.opts.Wait)
	defer deadline.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			return entry{}, fmt.Errorf("get cache %s %s after %v: %w", c.opts.Namespace, id, c.opts.Wait, ErrBusy)
		case <-ctx.Done():
			return entry{}, fmt.Errorf("get cache %s %s: %w", c.opts.Namespace, id, ctx.Err())
		case <-poll.C:
		}
		leased, e, err := c.claim(ctx, id, token, "")
		switch {
		case err != nil:
			return entry{}, err
		case e.present:
			return e, nil
		case leased:
			return c.rebuild(ctx, id, token)
		}
		poll.Reset(c.opts.Poll/2 + rand.N(c.opts.Poll/2+1))
	}
}

// rebuild loads id under the lease held with token and stores the result.
// A failed store still returns the loaded value: it is right, only not
// cached, and the lease expires by itself.
func (c *Cache) rebuild(ctx context.Context, id, token string) (entry, error) {
	lctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	start := time.Now()
	v, err := c.load(lctx, id)
	miss := errors.Is(err, ErrNotFound)
	if c.opts.OnRebuild != nil {
		if miss {
			c.opts.OnRebuild(nil)
		} else {
			c.opts.OnRebuild(err)
		}
	}
	if err != nil && !miss {
		c.unlease(id, token)
		return entry{}, fmt.Errorf("load cache %s %s: %w", c.opts.Namespace, id, err)
	}
	ttl := c.ttl(miss)
	e := entry{present: true, value: v, miss: miss, expiry: c.opts.Now().Add(ttl),
		delta: time.Since(start), version: token}
	if err := c.put(ctx, id, e, ttl); err != nil {
		c.opts.Log.Warn("rebuilt value not cached", "namespace", c.opts.Namespace, "id", id, "err", err)
	}
	return e, nil
}

// refresh rebuilds id in the background when its entry is still at
// version seen and nobody else holds the lease. A process runs at most one
// background rebuild per id.
func (c *Cache) refresh(id, seen string) {
	c.mu.Lock()
	if c.closed || c.refreshing[id] {
		c.mu.Unlock()
		return
	}
	if c.refreshing == nil {
		c.refreshing = make(map[string]bool)
	}
	c.refreshing[id] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.refreshing, id)
			c.mu.Unlock()
			c.wg.Done()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.LeaseTTL+time.Second)
		defer cancel()
		token := newToken()
		leased, _, err := c.claim(ctx, id, token, seen)
		if err == nil && leased {
			_, err = c.rebuild(ctx, id, token)
		}
		if err != nil {
			c.opts.Log.Warn("background cache rebuild failed", "namespace", c.opts.Namespace, "id", id, "err", err)
		}
	}()
}

// Update replaces id's cached value with fn(value) when a value is cached
// (not a miss), keeping its expiry; it reports whether it did. A
// concurrent rewrite makes it read again, up to three times, so updates
// computed from live data (a stock level) are not overwritten by older
// ones. Nothing is loaded: a missing entry stays missing.
func (c *Cache) Update(ctx context.Context, id string, fn func(old []byte) ([]byte, error)) (bool, error) {
	for range 3 {
		e, err := c.read(ctx, id)
		if err != nil || !e.present || e.miss {
			return false, err
		}
		v, err := fn(e.value)
		if err != nil {
			return false, fmt.Errorf("update cache %s %s: %w", c.opts.Namespace, id, err)
		}
		ok, err := c.swap(ctx, id, e.version, v)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// Invalidate drops id's entry; the next Get rebuilds it. A rebuild already
// running may still store what it loaded before.
func (c *Cache) Invalidate(ctx context.Context, id string) error {
	if err := c.rdb.Del(ctx, c.key(id)).Err(); err != nil {
		return fmt.Errorf("invalidate cache %s %s: %w", c.opts.Namespace, id, err)
	}
	return nil
}
