package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/lock"
)

// lockName returns a fresh lock name whose keys are deleted at cleanup.
func lockName(t testing.TB, rdb *redis.ClusterClient) string {
	t.Helper()
	name := testenv.Unique("t-lock-")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Lock(name), keys.LockFence(name)) })
	return name
}

// pausable stands for a process that can be frozen (a long GC pause,
// SIGSTOP, a VM migration): while paused, every Redis call it makes hangs
// until Resume, whatever its context says.
type pausable struct {
	redis.Scripter
	mu   sync.Mutex
	gate chan struct{} // closed while running
}

func newPausable(s redis.Scripter) *pausable {
	p := &pausable{Scripter: s, gate: make(chan struct{})}
	close(p.gate)
	return p
}

func (p *pausable) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

func (p *pausable) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
}

func (p *pausable) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

func (p *pausable) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	p.wait()
	return p.Scripter.Eval(ctx, script, keys, args...)
}

func (p *pausable) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	p.wait()
	return p.Scripter.EvalSha(ctx, sha1, keys, args...)
}

// waitLost waits for a watched lease taken over by another holder to
// cancel its context, with cause ErrLost.
func waitLost(t *testing.T, held context.Context) {
	t.Helper()
	select {
	case <-held.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("takeover never noticed")
	}
	if !errors.Is(context.Cause(held), lock.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(held))
	}
}
