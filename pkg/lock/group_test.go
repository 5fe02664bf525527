package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/lock"
)

// groupTag returns a fresh hash tag whose fence counter is deleted at
// cleanup (the leases are released or expire).
func groupTag(t testing.TB, rdb *redis.ClusterClient) string {
	t.Helper()
	tag := testenv.Unique("t-group-")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.TagFence(tag)) })
	return tag
}

// scriptCounter counts the script calls a client sends, pipelined or not.
type scriptCounter struct{ n atomic.Int64 }

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Orders of one SKU locked at once: 400 goroutines over four groups (four
// workers) each hold a lock of 40 names (ten redeliveries of each order).
// No two holders of a name are ever inside together; every name's tokens,
// recorded inside its critical section, grow strictly in the order the
// name was held; all 400 get their lock in the end; and the acquisitions
// went in far fewer script calls than locks.
func TestGroupHoldersOfANameNeverOverlap(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	counter := &scriptCounter{}
	groups := make([]*lock.Group, 4)
	for i := range groups {
		c := testenv.Redis(t)
		c.AddHook(counter)
		retry := lock.Exponential(2*time.Millisecond, 50*time.Millisecond, 0)
		groups[i] = lock.NewGroup(lock.New(c, lock.Options{Retry: retry}), lock.GroupOptions{TTL: 5 * time.Second})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const names, each = 40, 10
	var (
		inside   [names]atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		fences   [names][]int64
		wg       sync.WaitGroup
		errs     = make(chan error, names*each)
	)
	for i := range names * each {
		wg.Go(func() {
			n := i % names
			fence, held, release, err := groups[i%len(groups)].Hold(ctx, tag, fmt.Sprint("order:", n))
			if err != nil {
				errs <- err
				return
			}
			if inside[n].Add(1) != 1 {
				overlaps.Add(1)
			}
			mu.Lock()
			fences[n] = append(fences[n], fence)
			mu.Unlock()
			runtime.Gosched()
			if held.Err() != nil {
				errs <- fmt.Errorf("lease of order:%d lost while held: %w", n, context.Cause(held))
			}
			inside[n].Add(-1)
			release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := overlaps.Load(); got != 0 {
		t.Fatalf("%d holders found another holder of their name inside", got)
	}
	for n, fs := range fences {
		if len(fs) != each {
			t.Fatalf("order:%d held %d times, want %d", n, len(fs), each)
		}
		for i := 1; i < len(fs); i++ {
			if fs[i] <= fs[i-1] {
				t.Fatalf("order:%d: token %d after %d: tokens of a name must grow strictly", n, fs[i], fs[i-1])
			}
		}
	}
}

// Locks of one tag taken at once go in a few script calls: 400 orders
// held together by one group cost far fewer calls than the 800 that one
// acquisition and one release each would.
func TestGroupBatchesConcurrentHolds(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	counter := &scriptCounter{}
	c := testenv.Redis(t)
	c.AddHook(counter)
	g := lock.NewGroup(lock.New(c, lock.Options{Retry: lock.NoRetry()}), lock.GroupOptions{TTL: 5 * time.Second})
	ctx := context.Background()
	const n = 400
	start := make(chan struct{})
	var wg, holding sync.WaitGroup
	holding.Add(n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			_, _, release, err := g.Hold(ctx, tag, fmt.Sprint("o-", i))
			holding.Done()
			if err != nil {
				errs <- err
				return
			}
			holding.Wait() // all held at once, then all released at once
			release()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if calls := counter.n.Load(); calls > n/4 {
		t.Fatalf("%d script calls to take and release %d locks of one tag, want them batched (at most %d)", calls, n, n/4)
	}
	if left, err := rdb.Exists(ctx, keys.TaggedLock(tag, "o-0"), keys.TaggedLock(tag, fmt.Sprint("o-", n-1))).Result(); err != nil || left != 0 {
		t.Fatalf("%d leases left after release (%v)", left, err)
	}
}

// A batch may hold busy and free names: only the free ones are taken, and
// the busy one's caller gets ErrNotObtained once its retries run out.
func TestGroupTakesTheFreeNamesOfABatch(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	g := lock.NewGroup(lock.New(rdb, lock.Options{Retry: lock.NoRetry()}), lock.GroupOptions{TTL: 5 * time.Second})
	ctx := context.Background()
	_, _, releaseBusy, err := g.Hold(ctx, tag, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseBusy()

	var wg sync.WaitGroup
	results := make([]error, 50)
	for i := range results {
		wg.Go(func() {
			name := fmt.Sprint("free-", i)
			if i%10 == 0 {
				name = "busy"
			}
			_, _, release, err := g.Hold(ctx, tag, name)
			results[i] = err
			if err == nil {
				release()
			}
		})
	}
	wg.Wait()
	for i, err := range results {
		if i%10 == 0 {
			if !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("hold %d of the busy name: %v, want ErrNotObtained", i, err)
			}
		} else if err != nil {
			t.Fatalf("hold %d of a free name: %v", i, err)
		}
	}
}

// The tokens of a tag come from its master's clock as well as its
// counter: after a failover that lost the counter (here it is deleted),
// a name's next token is still above every token issued before.
func TestGroupFenceGrowsAfterCounterLoss(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	g := lock.NewGroup(lock.New(rdb, lock.Options{}), lock.GroupOptions{TTL: 5 * time.Second})
	ctx := context.Background()
	var highest int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 100 {
		wg.Go(func() {
			fence, _, release, err := g.Hold(ctx, tag, fmt.Sprint("o-", i))
			if err != nil {
				t.Error(err)
				return
			}
			release()
			mu.Lock()
			highest = max(highest, fence)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := rdb.Del(ctx, keys.TagFence(tag)).Err(); err != nil {
		t.Fatal(err)
	}
	// A failover takes seconds; the counter runs at most a batch's size
	// (microseconds) ahead of the clock.
	time.Sleep(2 * time.Millisecond)
	fence, _, release, err := g.Hold(ctx, tag, "o-7")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if fence <= highest {
		t.Fatalf("token %d after losing the counter, want above every earlier token (%d)", fence, highest)
	}
}

// A caller that gives up while its lease is being taken leaves no lease
// behind: the lease is released for it, and the name is free at once.
func TestGroupReleasesALeaseTakenForACallerThatLeft(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	g := lock.NewGroup(lock.New(rdb, lock.Options{Retry: lock.NoRetry()}), lock.GroupOptions{TTL: time.Minute})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := g.Hold(gone, tag, "left"); !errors.Is(err, context.Canceled) {
		t.Fatalf("hold with a cancelled context: %v, want context.Canceled", err)
	}
	// Its acquisition was queued before it left, so the lease was taken;
	// the name must come free long before the lease's minute is up.
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, release, err := g.Hold(ctx, tag, "left")
		if err == nil {
			release()
			return
		}
		if !errors.Is(err, lock.ErrNotObtained) || time.Now().After(deadline) {
			t.Fatalf("the name after its caller left: %v, want it free", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A group's lease is watched like any other: taken over (here its key is
// overwritten), its holder's context is cancelled with ErrLost.
func TestGroupLeaseLossCancelsTheHolder(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	g := lock.NewGroup(lock.New(rdb, lock.Options{}), lock.GroupOptions{TTL: 300 * time.Millisecond})
	ctx := context.Background()
	_, held, release, err := g.Hold(ctx, tag, "taken")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := rdb.Set(ctx, keys.TaggedLock(tag, "taken"), "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), keys.TaggedLock(tag, "taken")) })
	waitLost(t, held)
	release()
	if v, _ := rdb.Get(ctx, keys.TaggedLock(tag, "taken")).Result(); v != "someone-else" {
		t.Fatalf("the lost holder's release touched the new holder's lease: %q", v)
	}
}

// lostReply runs every script on Redis, then reports a timeout: a call
// Redis executed whose reply never came back (a read timeout, or the
// group's own deadline ending after the request left).
type lostReply struct{ redis.Scripter }

func (l lostReply) EvalSha(ctx context.Context, sha string, ks []string, args ...any) *redis.Cmd {
	c := l.Scripter.EvalSha(ctx, sha, ks, args...)
	if c.Err() == nil {
		c.SetErr(context.DeadlineExceeded)
	}
	return c
}

func (l lostReply) Eval(ctx context.Context, src string, ks []string, args ...any) *redis.Cmd {
	c := l.Scripter.Eval(ctx, src, ks, args...)
	if c.Err() == nil {
		c.SetErr(context.DeadlineExceeded)
	}
	return c
}

// The leases a call took before its reply was lost belong to nobody: the
// callers got an error. They are released, not left to lock a batch of
// orders out for a whole TTL.
func TestGroupReleasesTheLeasesOfACallWhoseReplyWasLost(t *testing.T) {
	rdb := testenv.Redis(t)
	tag := groupTag(t, rdb)
	ctx := context.Background()
	lossy := lock.NewGroup(lock.New(lostReply{rdb}, lock.Options{Retry: lock.NoRetry()}), lock.GroupOptions{TTL: time.Minute})
	names := make([]string, 20)
	var wg sync.WaitGroup
	for i := range names {
		names[i] = fmt.Sprint("o-", i)
		wg.Go(func() {
			if _, _, _, err := lossy.Hold(ctx, tag, names[i]); err == nil {
				t.Errorf("hold of %s through a call whose reply was lost: no error", names[i])
			}
		})
	}
	wg.Wait()
	good := lock.NewGroup(lock.New(rdb, lock.Options{Retry: lock.NoRetry()}), lock.GroupOptions{TTL: time.Minute})
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for {
			_, _, release, err := good.Hold(ctx, tag, name)
			if err == nil {
				release()
				break
			}
			if !errors.Is(err, lock.ErrNotObtained) || time.Now().After(deadline) {
				t.Fatalf("%s after the lost reply: %v, want it free long before its lease's minute", name, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
