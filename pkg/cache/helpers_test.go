package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/cache"
	"surge/pkg/keys"
)

// namespace returns a fresh cache namespace; the keys of ids are deleted
// at cleanup.
func namespace(t testing.TB, rdb *redis.ClusterClient, ids ...string) string {
	t.Helper()
	ns := testenv.Unique("t-cache-")
	t.Cleanup(func() {
		for _, id := range ids {
			rdb.Del(context.Background(), keys.Cache(ns, id), keys.CacheLease(ns, id))
		}
	})
	return ns
}

// source is a loader that counts its calls, takes delay, and answers
// value (or err).
type source struct {
	loads atomic.Int32
	delay time.Duration
	value atomic.Value // string
	err   error
}

func newSource(value string, delay time.Duration) *source {
	s := &source{delay: delay}
	s.value.Store(value)
	return s
}

func (s *source) load(ctx context.Context, id string) ([]byte, error) {
	s.loads.Add(1)
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return []byte(s.value.Load().(string)), nil
}

func newCache(t testing.TB, rdb *redis.ClusterClient, ns string, src *source, opts cache.Options) *cache.Cache {
	t.Helper()
	opts.Namespace = ns
	c := cache.New(rdb, src.load, opts)
	t.Cleanup(c.Close)
	return c
}
