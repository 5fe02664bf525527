package lock_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/lock"
)

// A thousand goroutines over four clients (four processes) each take the
// lock once; a shared counter of current holders must never exceed one,
// and the fencing tokens, recorded inside the critical section, must grow
// strictly in the order the lock was held.
func TestThousandGoroutinesNeverHoldTogether(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	clients := make([]*lock.Client, 4)
	for i := range clients {
		clients[i] = lock.New(testenv.Redis(t), lock.Options{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const n = 1000
	var (
		holders, overlaps atomic.Int32
		mu                sync.Mutex
		fences            []int64
		wg                sync.WaitGroup
		errs              = make(chan error, n)
	)
	retry := lock.Exponential(5*time.Millisecond, 200*time.Millisecond, 0)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := clients[i%len(clients)].Acquire(ctx, name, 5*time.Second, retry)
			if err != nil {
				errs <- err
				return
			}
			if holders.Add(1) != 1 {
				overlaps.Add(1)
			}
			mu.Lock()
			fences = append(fences, l.Fence())
			mu.Unlock()
			runtime.Gosched()
			holders.Add(-1)
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if got := overlaps.Load(); got != 0 {
		t.Fatalf("%d acquisitions found another holder inside the critical section", got)
	}
	for err := range errs {
		t.Fatal(err)
	}
	if len(fences) != n {
		t.Fatalf("%d acquisitions, want %d", len(fences), n)
	}
	for i := 1; i < n; i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d = %d after %d: tokens must grow strictly", i, fences[i], fences[i-1])
		}
	}
}

// A holder whose lease is gone (expired, or lost in a failover: here the
// key is deleted) can neither release nor extend the lease of the holder
// that came after it.
func TestNonOwnerCannotReleaseOrExtend(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()

	a, err := c.Acquire(ctx, name, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, name, 10*time.Second, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second acquire while held: %v, want ErrNotObtained", err)
	}
	if err := rdb.Del(ctx, keys.Lock(name)).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, name, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("new holder's fence %d is not above the old one's %d", b.Fence(), a.Fence())
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release by the old holder: %v, want ErrNotHeld", err)
	}
	if err := a.Extend(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("extend by the old holder: %v, want ErrNotHeld", err)
	}
	if got := rdb.Get(ctx, keys.Lock(name)).Val(); got != b.Token() {
		t.Fatalf("lease holds %q after the old holder's attempts, want the new holder's %q", got, b.Token())
	}
	if err := b.Extend(ctx); err != nil {
		t.Fatalf("extend by the holder: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	if n := rdb.Exists(ctx, keys.Lock(name)).Val(); n != 0 {
		t.Fatal("lease key still exists after release")
	}
}

// A failover can promote a replica whose fence counter is behind, or
// missing; a backward clock step can put the counter ahead of the clock.
// Tokens must still grow.
func TestFenceGrowsAfterCounterRollback(t *testing.T) {
	rdb := testenv.Redis(t)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()
	farAhead := time.Now().Add(24 * time.Hour).UnixMicro()
	tests := []struct {
		name     string
		rollback func(fenceKey string, last int64) error
		want     func(last int64) int64 // 0: any token above last
	}{
		{"counter lost", func(k string, _ int64) error { return rdb.Del(ctx, k).Err() }, nil},
		{"counter behind", func(k string, last int64) error { return rdb.Set(ctx, k, last-1_000_000, 0).Err() }, nil},
		{"counter ahead of the clock", func(k string, _ int64) error { return rdb.Set(ctx, k, farAhead, 0).Err() },
			func(int64) int64 { return farAhead + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := lockName(t, rdb)
			first := acquireRelease(t, c, name)
			if err := tt.rollback(keys.LockFence(name), first); err != nil {
				t.Fatal(err)
			}
			next := acquireRelease(t, c, name)
			if next <= first {
				t.Fatalf("token %d after rollback is not above %d", next, first)
			}
			if tt.want != nil && next != tt.want(first) {
				t.Fatalf("token %d, want %d", next, tt.want(first))
			}
		})
	}
}

func acquireRelease(t *testing.T, c *lock.Client, name string) int64 {
	t.Helper()
	l, err := c.Acquire(context.Background(), name, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l.Fence()
}

// The fence counter expires (bounded memory for per-order locks) and the
// lease key carries the TTL asked for.
func TestKeysExpire(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{FenceTTL: time.Minute})
	ctx := context.Background()
	l, err := c.Acquire(ctx, name, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for key, max := range map[string]time.Duration{keys.Lock(name): 30 * time.Second, keys.LockFence(name): time.Minute} {
		ttl := rdb.PTTL(ctx, key).Val()
		if ttl <= 0 || ttl > max {
			t.Errorf("%s: PTTL %v, want in (0, %v]", key, ttl, max)
		}
	}
	if got := rdb.Get(ctx, keys.LockFence(name)).Val(); got != strconv.FormatInt(l.Fence(), 10) {
		t.Errorf("fence counter holds %q, want %d", got, l.Fence())
	}
}

// Acquire gives up when its retries are spent, and with ctx's cause when
// ctx ends first.
func TestAcquireGivesUp(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	c := lock.New(rdb, lock.Options{})
	ctx := context.Background()
	l, err := c.Acquire(ctx, name, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := c.Acquire(ctx, name, time.Second, lock.Linear(time.Millisecond, 3)); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("bounded retry: %v, want ErrNotObtained", err)
	}
	cause := errors.New("shutting down")
	cctx, cancel := context.WithTimeoutCause(ctx, 50*time.Millisecond, cause)
	defer cancel()
	if _, err := c.Acquire(cctx, name, time.Second, lock.Linear(10*time.Millisecond, 0)); !errors.Is(err, cause) {
		t.Fatalf("wait ended by the context: %v, want the context's cause", err)
	}
}

var _ redis.Scripter = (*pausable)(nil)

// TestAcquireSentTwice: go-redis sends a script again when its reply timed
// out. The second run of an acquisition that took the lease must return
// its fencing token, not "held by another".
func TestAcquireSentTwice(t *testing.T) {
	rdb := testenv.Redis(t)
	name := lockName(t, rdb)
	l, err := lock.New(&twice{rdb}, lock.Options{}).Acquire(context.Background(), name, time.Second, nil)
	if err != nil {
		t.Fatalf("acquire with every script run twice: %v", err)
	}
	defer l.Release(context.Background())
	if l.Fence() <= 0 {
		t.Fatalf("fence %d, want the token the first run issued", l.Fence())
	}
}

// twice runs every script twice and returns the second reply.
type twice struct{ *redis.ClusterClient }

func (d *twice) EvalSha(ctx context.Context, sha string, ks []string, args ...any) *redis.Cmd {
	d.ClusterClient.EvalSha(ctx, sha, ks, args...)
	return d.ClusterClient.EvalSha(ctx, sha, ks, args...)
}
