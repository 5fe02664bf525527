// Package cache is a cache-aside layer on Redis Cluster that does not
// stampede. Values are opaque bytes produced by a Loader; the cache knows
// nothing about what they mean.
//
// Each entry is a hash holding the value, its soft expiry, how long its
// load took and a version. Redis keeps it for its soft TTL (with jitter,
// so entries loaded together do not expire together) plus a stale window.
// A reader that finds the entry fresh returns it. One that finds it stale,
// or draws an early refresh (XFetch: probabilistic early expiration,
// likelier as expiry nears and the slower the load), returns it too and
// triggers a rebuild in the background. One that finds nothing waits for
// the rebuild. Whatever the number of readers and processes, one rebuild
// runs per key: in a process, callers share one flight per key; across
// processes, the rebuilder must take the entry's Redis lease, and taking
// it is one script with reading the entry, so a reader that saw an old
// version cannot start a second rebuild once the new one is written.
// Loaders report unknown ids with ErrNotFound; such misses are cached for
// a short time too.
package cache

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

var (
	// ErrNotFound is returned by Get for ids the loader does not know
	// (the miss is cached for Options.MissTTL). Loaders wrap it.
	ErrNotFound = errors.New("not found")
	// ErrBusy means another rebuild of a missing entry was still running
	// when the wait ran out; the caller may retry.
	ErrBusy = errors.New("cache rebuild still running")
)

// Loader reads the value of id from the source of truth. It returns an
// error wrapping ErrNotFound for an unknown id.
type Loader func(ctx context.Context, id string) ([]byte, error)

// Client is the part of a Redis client the cache needs.
// *redis.ClusterClient satisfies it.
type Client interface {
	redis.Scripter
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

var _ Client = (*redis.ClusterClient)(nil)

// Options tunes a Cache. The zero value of each field means its default.
type Options struct {
	// Namespace names the cache in its keys (keys.Cache). Required.
	Namespace string
	// TTL is how long a loaded value counts as fresh. Default 30s.
	TTL time.Duration
	// Jitter spreads TTLs by up to this fraction either way. Default
	// 0.1; negative disables it.
	Jitter float64
	// Stale is how long past its TTL a value may still be served while
	// it is rebuilt. Default 1m.
	Stale time.Duration
	// MissTTL is how long an unknown id is remembered. Default 5s.
	MissTTL time.Duration
	// LeaseTTL bounds a rebuild: the lease expires after it, so a crashed
	// rebuilder is replaced, and the loader's context ends with it.
	// Default 5s.
	LeaseTTL time.Duration
	// Wait is how long a reader with no value waits for another
	// process's rebuild before giving up with ErrBusy. Default 1s.
	Wait time.Duration
	// Poll is how often a waiting reader looks for the rebuilt value.
	// Default 10ms.
	Poll time.Duration
	// Beta weighs XFetch's early refresh: larger refreshes earlier.
	// Default 1; negative disables early refresh.
	Beta float64
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// Rand returns a uniform float in [0, 1). Default math/rand/v2.
	Rand func() float64
	// OnGet, when set, is told of each Get whether the entry was found in
	// Redis (hit) or had to be waited for or rebuilt (miss): metrics.
	OnGet func(hit bool)
	// OnRebuild, when set, is told of each loader run: nil when it
	// produced a value or an unknown id (a miss to remember), its error
	// otherwise: metrics.
	OnRebuild func(err error)
	// Log receives background rebuild failures. Default slog.Default().
	Log *slog.Logger
}

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TTL, 30*time.Second)
	def(&o.Stale, time.Minute)
	def(&o.MissTTL, 5*time.Second)
	def(&o.LeaseTTL, 5*time.Second)
	def(&o.Wait, time.Second)
	def(&o.Poll, 10*time.Millisecond)
	if o.Jitter == 0 {
		o.Jitter = 0.1
	}
	if o.Beta == 0 {
		o.Beta = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Cache is one process's handle on a cache namespace. Its methods are
// safe for concurrent use.
type Cache struct {
	rdb    Client
	load   Loader
	opts   Options
	flight singleflight.Group // missing entries: one wait-or-rebuild per id
	wg     sync.WaitGroup     // background rebuilds

	mu         sync.Mutex
	refreshing map[string]bool // ids with a background rebuild running
	closed     bool
}

// New returns a cache of the values load produces, stored through rdb.
// It panics when opts.Namespace is empty: that is a wiring mistake.
func New(rdb Client, load Loader, opts Options) *Cache {
	if opts.Namespace == "" {
		panic("cache: Options.Namespace is required")
	}
	opts.setDefaults()
	return &Cache{rdb: rdb, load: load, opts: opts}
}

// Close waits for the background rebuilds to finish; later stale reads
// start none.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}

// ttl returns the soft TTL of a value (or a miss), with jitter.
func (c *Cache) ttl(miss bool) time.Duration {
	d := c.opts.TTL
	if miss {
		d = c.opts.MissTTL
	}
	if c.opts.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + c.opts.Jitter*(2*c.opts.Rand()-1)))
	}
	return d
}

// early reports whether a fresh entry should be refreshed now (XFetch:
// now - delta*beta*ln(rand) >= expiry).
func (c *Cache) early(e entry, now time.Time) bool {
	if c.opts.Beta < 0 || e.delta <= 0 {
		return false
	}
	r := c.opts.Rand()
	if r <= 0 {
		return false
	}
	gap := time.Duration(-float64(e.delta) * c.opts.Beta * math.Log(r))
	return !now.Add(gap).Before(e.expiry)
}
