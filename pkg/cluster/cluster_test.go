package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/cluster"
)

// echo answers with its caller's own argument and the key's new count, so a
// reply handed to the wrong caller, or counts run out of order, show.
var echo = redis.NewScript(`return {ARGV[1], redis.call('INCR', KEYS[1])}`)

func newClient(t testing.TB, auto bool) *cluster.Client {
	t.Helper()
	testenv.Redis(t) // skips (or fails in CI) when the cluster is down
	c := cluster.New(cluster.Options{Addrs: testenv.RedisAddrs(), Password: testenv.RedisPassword(), AutoPipeline: auto})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestBatchedAnswersEachCaller runs 256 goroutines at once through the
// autopipeliner, each counting its own key (spread over every master) with
// a script and a plain command in turn. Every caller must get its own
// replies, in its own order.
func TestBatchedAnswersEachCaller(t *testing.T) {
	c := newClient(t, true)
	rdb, err := c.Batched()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rdb.(*redis.AutoPipeliner); !ok {
		t.Fatalf("Batched with AutoPipeline returned %T, want the autopipeliner", rdb)
	}
	ctx := context.Background()
	prefix := testenv.Unique("batched-")
	const callers, rounds = 256, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		key := fmt.Sprintf("%s-%d", prefix, g) // no hash tag: keys land on every master
		t.Cleanup(func() { c.Del(context.Background(), key) })
		wg.Go(func() {
			for i := 1; i <= rounds; i += 2 {
				me := fmt.Sprintf("caller %d round %d", g, i)
				got, err := echo.Run(ctx, rdb, []string{key}, me).Slice()
				if err != nil || len(got) != 2 || got[0] != me || got[1] != int64(i) {
					errs <- fmt.Errorf("%s: script answered %v, %v", me, got, err)
					return
				}
				if n, err := rdb.Incr(ctx, key).Result(); err != nil || n != int64(i+1) {
					errs <- fmt.Errorf("%s: INCR answered %d, %v; want %d", me, n, err, i+1)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBatchedWithoutAutoPipelineIsThePlainClient(t *testing.T) {
	c := cluster.New(cluster.Options{})
	defer c.Close()
	rdb, err := c.Batched()
	if err != nil {
		t.Fatal(err)
	}
	if rdb != redis.Cmdable(c.ClusterClient) {
		t.Fatalf("Batched without AutoPipeline returned %T, want the cluster client", rdb)
	}
}

// BenchmarkHotKeyScript runs a one-key script from many goroutines on one
// hot key, as a flash sale's reservations do: plain round trips against
// the autopipeliner.
//
//	go test -run '^$' -bench HotKeyScript -benchtime 3s ./pkg/cluster
func BenchmarkHotKeyScript(b *testing.B) {
	for _, auto := range []bool{false, true} {
		b.Run(fmt.Sprintf("autopipeline=%v", auto), func(b *testing.B) {
			c := newClient(b, auto)
			rdb, err := c.Batched()
			if err != nil {
				b.Fatal(err)
			}
			key := "{" + testenv.Unique("hot-") + "}"
			b.Cleanup(func() { c.Del(context.Background(), key) })
			ctx := context.Background()
			b.SetParallelism(64) // 64 x GOMAXPROCS callers, like a gateway's requests in flight
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := echo.Run(ctx, rdb, []string{key}, "x").Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
