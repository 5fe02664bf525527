package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/lock"
)

// The cost of a lock: one acquire plus one release, against
// bsm/redislock's Obtain plus Release on the same cluster in the same run.
// surge's acquire also issues a fencing token (one more GET and SET inside
// the script). Run with: go test -run '^$' -bench . ./pkg/lock
func BenchmarkAcquireRelease(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	b.Run("surge", func(b *testing.B) {
		c := lock.New(rdb, lock.Options{})
		name := lockName(b, rdb)
		for b.Loop() {
			l, err := c.Acquire(ctx, name, 10*time.Second, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redislock", func(b *testing.B) {
		c := redislock.New(rdb)
		key := keys.Lock(lockName(b, rdb))
		for b.Loop() {
			l, err := c.Obtain(ctx, key, 10*time.Second, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The same, from 16 goroutines per CPU each on its own lock name, spread
// over the cluster's masters: throughput rather than latency.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	b.Run("surge", func(b *testing.B) {
		c := lock.New(rdb, lock.Options{})
		names := parallelNames(b, rdb)
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			name := names()
			for pb.Next() {
				l, err := c.Acquire(ctx, name, 10*time.Second, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("redislock", func(b *testing.B) {
		c := redislock.New(rdb)
		names := parallelNames(b, rdb)
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			key := keys.Lock(names())
			for pb.Next() {
				l, err := c.Obtain(ctx, key, 10*time.Second, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// parallelNames hands each parallel goroutine its own lock name.
func parallelNames(b *testing.B, rdb *redis.ClusterClient) func() string {
	base := lockName(b, rdb)
	return func() string {
		name := testenv.Unique(base + "-")
		b.Cleanup(func() { rdb.Del(context.Background(), keys.Lock(name), keys.LockFence(name)) })
		return name
	}
}
