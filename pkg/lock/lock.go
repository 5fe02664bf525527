// Package lock is a distributed lock on Redis Cluster with fencing tokens.
//
// A lease is taken with SET NX PX under a random holder token and released
// or extended by scripts that check that token, so nobody else's lease is
// ever touched. Every acquisition also returns a fencing token, strictly
// larger than any issued before for the same name, even across a Redis
// failover (see lua/lock_acquire.lua for the source of the tokens and the
// clock assumption behind it). A lease can be lost while its holder still
// works: a process pause longer than the TTL, or a failover that drops the
// lease key. The lock alone therefore never guards a write; the resource
// must refuse writes carrying a token lower than one it has seen, as
// store.Process does with order_fences.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/keys"
)

var (
	// ErrNotObtained means another holder has the lock and the retry
	// strategy gave up.
	ErrNotObtained = errors.New("lock not obtained")
	// ErrNotHeld means the caller's lease is gone: expired, lost in a
	// failover, or taken over by another holder.
	ErrNotHeld = errors.New("lock not held")
	// ErrLost is the cause of a watched context cancelled because its
	// lease ran out or was taken over.
	ErrLost = errors.New("lock lease lost")
)

// Options tunes a Client. The zero value of each field means its default.
type Options struct {
	// Retry is the strategy of Hold and WithLock when the lock is busy.
	// Default: Exponential(10ms, 200ms, 10).
	Retry Retry
	// FenceTTL is how long a name's fence counter outlives its last
	// acquisition. Tokens come from the master's clock as well, so the
	// counter only has to outlive a backward clock step. Default 1h.
	FenceTTL time.Duration
}

func (o *Options) setDefaults() {
	if o.Retry == nil {
		o.Retry = Exponential(10*time.Millisecond, 200*time.Millisecond, 10)
	}
	if o.FenceTTL <= 0 {
		o.FenceTTL = time.Hour
	}
}

// Client takes leases on a Redis (Cluster) client.
type Client struct {
	rdb      redis.Scripter
	opts     Options
	fenceTTL string
	// dog watches every lease of this client (see Watch).
	dog *watchdog
}

// New returns a Client on rdb (a *redis.ClusterClient in surge).
func New(rdb redis.Scripter, opts Options) *Client {
	opts.setDefaults()
	return &Client{rdb: rdb, opts: opts, fenceTTL: strconv.FormatInt(opts.FenceTTL.Milliseconds(), 10), dog: newWatchdog()}
}

// Acquire takes the lock on name for ttl (at least 1ms), trying again as
// retry says while another holder has it (nil means a single attempt). It
// returns ErrNotObtained when retry gives up, ctx's error when ctx ends
// first, and a wrapped Redis error when Redis fails.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, retry Retry) (*Lease, error) {
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("acquire lock %s: ttl %v is below 1ms", name, ttl)
	}
	if retry == nil {
		retry = NoRetry()
	}
	token, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	l := &Lease{c: c, name: name, key: keys.Lock(name), token: token, ttl: ttl}
	if err := acquire(ctx, name, retry, l.try); err != nil {
		return nil, err
	}
	return l, nil
}

// acquire runs try until it takes the lease, waiting as retry says while
// another holder has it. It returns ErrNotObtained when retry gives up,
// ctx's cause when ctx ends first, and try's error otherwise, each
// wrapped with the lock's name.
func acquire(ctx context.Context, name string, retry Retry, try func(context.Context) (bool, error)) error {
	var timer *time.Timer
	for failed := 0; ; failed++ {
		ok, err := try(ctx)
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			return fmt.Errorf("acquire lock %s: %w", name, err)
		}
		if ok {
			return nil
		}
		wait, again := retry.Next(failed + 1)
		if !again {
			return fmt.Errorf("acquire lock %s after %d attempts: %w", name, failed+1, ErrNotObtained)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("acquire lock %s: %w", name, context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// try runs one acquisition attempt; the lease's validity is counted from
// before the request was sent.
func (l *Lease) try(ctx context.Context) (bool, error) {
	start := time.Now()
	fence, err := lua.LockAcquire.Run(ctx, l.c.rdb, []string{l.key, keys.LockFence(l.name)},
		l.token, l.ttl.Milliseconds(), l.c.fenceTTL).Int64()
	if err != nil || fence == 0 {
		return false, err
	}
	l.fence = fence
	l.validUntil = validity(start, l.ttl)
	return true, nil
}

// validity is when a lease requested at start for ttl must be considered
// gone locally: a margin for clock drift between the process and Redis
// (Redlock's 1% plus 2ms) is taken off.
func validity(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - ttl/100 - 2*time.Millisecond)
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
