package console

import (
	"net/netip"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Sign-in is throttled per client address: after signInFailures wrong
// tokens within signInWindow, the address is answered 429 with
// Retry-After until the oldest of them leaves the window. The admin token
// is the only secret between a reachable console and every change it can
// make, so guessing it must be slow.
const (
	signInFailures = 5
	signInWindow   = time.Minute
	// signInAddrs bounds the memory: the addresses with recent failures
	// kept, least recently failing dropped first.
	signInAddrs = 4096
)

// throttle keeps each address's recent failure times (at most limit).
type throttle struct {
	limit  int
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	fails  *lru.Cache[string, []time.Time]
}

func newThrottle(limit int, window time.Duration, size int, now func() time.Time) *throttle {
	c, err := lru.New[string, []time.Time](size)
	if err != nil {
		panic(err) // size <= 0: a constant above
	}
	return &throttle{limit: limit, window: window, now: now, fails: c}
}

// wait is how long addr must wait before trying again: 0 when it may.
func (t *throttle) wait(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.recent(addr)
	if len(fs) < t.limit {
		return 0
	}
	return fs[0].Add(t.window).Sub(t.now())
}

// fail records a failed sign-in from addr.
func (t *throttle) fail(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := append(t.recent(addr), t.now())
	if len(fs) > t.limit {
		fs = fs[len(fs)-t.limit:]
	}
	t.fails.Add(addr, fs)
}

// forget clears addr after a good sign-in.
func (t *throttle) forget(addr string) { t.fails.Remove(addr) }

// recent is addr's failures still in the window; t.mu is held.
func (t *throttle) recent(addr string) []time.Time {
	fs, _ := t.fails.Peek(addr)
	now := t.now()
	i := 0
	for i < len(fs) && now.Sub(fs[i]) >= t.window {
		i++
	}
	return append([]time.Time(nil), fs[i:]...)
}

// throttleKey is the address a client is throttled by: IPv4 as is, IPv6
// by its /64 (one host usually holds a whole /64).
func throttleKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Unmap().Is4() {
		return addr
	}
	p, _ := a.Prefix(64)
	return p.String()
}
