package lock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"surge/internal/coalesce"
	"surge/lua"
	"surge/pkg/keys"
)

// GroupOptions tunes a Group. The zero value of each field means its
// default.
type GroupOptions struct {
	// TTL is every lease's duration. Default 10s.
	TTL time.Duration
	// MaxBatch caps the leases of one script call. Default 256.
	MaxBatch int
	// Timeout bounds one script call, which is tied to no single caller's
	// context. Default 5s.
	Timeout time.Duration
}

func (o *GroupOptions) setDefaults() {
	if o.TTL <= 0 {
		o.TTL = 10 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
}

// Group takes the locks whose names share a hash tag together: the Hold
// calls for one tag that arrive while a call for that tag is in flight
// go in the next one (lua/lock_acquire_many.lua), and so do their
// releases (lua/lease_release_many.lua). A tag with no call in flight
// sends at once, so a lock waits for at most one call ahead of its own,
// and a busy tag costs two script calls per round trip instead of two
// per lock. Each lease is still its own: its own key and holder token,
// its own TTL kept alive by the client's watchdog, its own release.
//
// The fencing tokens come from one counter per tag instead of one per
// name, so a name must always be locked under the same tag: the worker
// locks an order under its SKU's tag. Locks taken through a Group and
// through Client.Acquire use different keys and never exclude each other.
type Group struct {
	c        *Client
	opts     GroupOptions
	ttl      string
	acquires *coalesce.Coalescer[*acquireReq]
	releases *coalesce.Coalescer[*releaseReq]
}

// NewGroup returns a Group taking leases on c's Redis with c's retry
// strategy and fence counter TTL. A TTL under a millisecond is raised to
// one.
func NewGroup(c *Client, opts GroupOptions) *Group {
	opts.setDefaults()
	opts.TTL = max(opts.TTL, time.Millisecond)
	g := &Group{c: c, opts: opts, ttl: strconv.FormatInt(opts.TTL.Milliseconds(), 10)}
	g.acquires = coalesce.New(opts.MaxBatch, g.sendAcquires)
	g.releases = coalesce.New(opts.MaxBatch, g.sendReleases)
	return g
}

// acquireReq is one lease waiting for its tag's next acquisition call.
type acquireReq struct {
	l    *Lease
	done chan acquireResult
	// state is reqWaiting until the call's result is handed over
	// (reqDelivered) or the caller gives up first (reqAbandoned).
	state atomic.Int32
}

const (
	reqWaiting = iota
	reqDelivered
	reqAbandoned
)

type acquireResult struct {
	fence int64
	until time.Time
	err   error
}

type releaseReq struct {
	l    *Lease
	done chan struct{}
}

// Hold acquires the lock on name under tag, retrying as the client's
// strategy says while another holder has it, and watches it. It has
// Client.Hold's results: the fencing token, a context cancelled when the
// lease is lost, and release, which stops the watching and releases the
// lease (errors are ignored: a lease that cannot be released expires).
func (g *Group) Hold(ctx context.Context, tag, name string) (fence int64, held context.Context, release func(), err error) {
	token, err := newToken()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	l := &Lease{c: g.c, name: name, key: keys.TaggedLock(tag, name), token: token, ttl: g.opts.TTL}
	err = acquire(ctx, name, g.c.opts.Retry, func(ctx context.Context) (bool, error) { return g.try(ctx, tag, l) })
	if err != nil {
		return 0, nil, nil, err
	}
	held, stop := l.Watch(ctx)
	return l.fence, held, func() {
		stop()
		g.release(tag, l)
	}, nil
}

// try queues one acquisition attempt and waits for it. A caller that gives
// up leaves its lease in the call; a lease taken for nobody is released.
func (g *Group) try(ctx context.Context, tag string, l *Lease) (bool, error) {
	r := &acquireReq{l: l, done: make(chan acquireResult, 1)}
	g.acquires.Add(tag, r)
	select {
	case res := <-r.done:
		if res.err != nil || res.fence == 0 {
			return false, res.err
		}
		l.fence, l.validUntil = res.fence, res.until
		return true, nil
	case <-ctx.Done():
		if !r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			if res := <-r.done; res.fence > 0 {
				g.release(tag, l)
			}
		}
		return false, context.Cause(ctx)
	}
}

func (g *Group) sendAcquires(tag string, batch []*acquireReq) {
	ks := make([]string, 1, len(batch)+1)
	ks[0] = keys.TagFence(tag)
	args := make([]any, 2, len(batch)+2)
	args[0], args[1] = g.ttl, g.c.fenceTTL
	for _, r := range batch {
		ks = append(ks, r.l.key)
		args = append(args, r.l.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.Timeout)
	defer cancel()
	start := time.Now()
	fences, err := lua.LockAcquireMany.Run(ctx, g.c.rdb, ks, args...).Int64Slice()
	if err == nil && len(fences) != len(batch) {
		err = fmt.Errorf("lock_acquire_many answered %d tokens for %d leases", len(fences), len(batch))
	}
	until := validity(start, g.opts.TTL)
	for i, r := range batch {
		res := acquireResult{until: until, err: err}
		if err == nil {
			res.fence = fences[i]
		}
		delivered := r.state.CompareAndSwap(reqWaiting, reqDelivered)
		if delivered {
			r.done <- res
		}
		// A failed call may have run (its reply lost), and a lease taken
		// for a caller that left is nobody's: release both, by token, so
		// the orders are not locked out for a whole TTL. A lease that was
		// never taken is left alone by the script.
		if err != nil || (!delivered && res.fence > 0) {
			g.releases.Add(tag, &releaseReq{l: r.l, done: make(chan struct{}, 1)})
		}
	}
}

// release queues l for its tag's next release call and waits up to a
// second for it, whatever the holder's context says.
func (g *Group) release(tag string, l *Lease) {
	r := &releaseReq{l: l, done: make(chan struct{}, 1)}
	g.releases.Add(tag, r)
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	}
}

func (g *Group) sendReleases(_ string, batch []*releaseReq) {
	ks := make([]string, len(batch))
	args := make([]any, len(batch))
	for i, r := range batch {
		ks[i], args[i] = r.l.key, r.l.token
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.Timeout)
	defer cancel()
	// A lease not released expires: its error changes nothing for anyone.
	_ = lua.LeaseReleaseMany.Run(ctx, g.c.rdb, ks, args...).Err()
	for _, r := range batch {
		r.done <- struct{}{}
	}
}
