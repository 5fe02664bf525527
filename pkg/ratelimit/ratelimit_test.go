package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/ratelimit"
)

// A rate of one request per 100 s makes the budget the burst alone: no
// refill happens while the test runs, whatever the machine's speed.
const slowRate = 0.01

func TestBurstThenRefusedWithoutSpending(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	subject := testenv.Unique("burst-")
	t.Cleanup(func() { rdb.Del(ctx, keys.RateLimit("t:"+subject)) })
	l := ratelimit.New(rdb, "t:", slowRate, 5)

	for i := range 5 {
		ok, after, err := l.Allow(ctx, subject)
		if err != nil || !ok || after != 0 {
			t.Fatalf("request %d: allowed=%v retry=%v err=%v, want allowed", i+1, ok, after, err)
		}
	}
	tat, err := rdb.Get(ctx, keys.RateLimit("t:"+subject)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ok, after, err := l.Allow(ctx, subject)
		if err != nil || ok {
			t.Fatalf("request past the burst: allowed=%v err=%v, want refused", ok, err)
		}
		if after <= 0 || after > 100*time.Second {
			t.Fatalf("retry after %v, want within one emission interval (0, 100s]", after)
		}
	}
	if again, _ := rdb.Get(ctx, keys.RateLimit("t:"+subject)).Result(); again != tat {
		t.Fatalf("refused requests changed the budget: %s -> %s", tat, again)
	}
	ttl, err := rdb.PTTL(ctx, keys.RateLimit("t:"+subject)).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("budget key has no expiry (ttl %v, err %v): idle subjects would stay in memory", ttl, err)
	}

	other := testenv.Unique("other-")
	t.Cleanup(func() { rdb.Del(ctx, keys.RateLimit("t:"+other)) })
	if ok, _, err := l.Allow(ctx, other); err != nil || !ok {
		t.Fatalf("another subject was refused (err %v): budgets must be per subject", err)
	}
}

// TestRaceForBurst: 200 concurrent requests of one subject against a
// burst of 10 must let exactly 10 through, as several gateway instances
// sharing the budget would.
func TestRaceForBurst(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	subject := testenv.Unique("race-")
	t.Cleanup(func() { rdb.Del(ctx, keys.RateLimit("t:"+subject)) })
	limiters := []*ratelimit.Limiter{
		ratelimit.New(rdb, "t:", slowRate, 10),
		ratelimit.New(testenv.Redis(t), "t:", slowRate, 10), // a second "instance"
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := limiters[i%2].Allow(ctx, subject)
			if err != nil {
				t.Error(err)
			}
			if ok {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Fatalf("%d requests allowed, want exactly the burst of 10", n)
	}
}

func TestOffAndDefaults(t *testing.T) {
	var off *ratelimit.Limiter = ratelimit.New(nil, "t:", -1, 10)
	if off != nil {
		t.Fatal("a negative rate must turn the limit off")
	}
	if ok, _, err := off.Allow(context.Background(), "anyone"); !ok || err != nil {
		t.Fatalf("an off limit refused: %v", err)
	}
	c := ratelimit.NewConfig(ratelimit.Config{IPRate: -1})
	want := ratelimit.Config{CustomerRate: 20, CustomerBurst: 40, IPRate: -1, IPBurst: 20000}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name string
		in   ratelimit.Config
		want ratelimit.Config
	}{
		{"zero", ratelimit.Config{}, ratelimit.Config{CustomerRate: 20, CustomerBurst: 40, IPRate: 10000, IPBurst: 20000}},
		{"set", ratelimit.Config{CustomerRate: 1, CustomerBurst: 2, IPRate: 3, IPBurst: 4},
			ratelimit.Config{CustomerRate: 1, CustomerBurst: 2, IPRate: 3, IPBurst: 4}},
		{"off", ratelimit.Config{CustomerRate: -1}, ratelimit.Config{CustomerRate: -1, CustomerBurst: 40, IPRate: 10000, IPBurst: 20000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ratelimit.NewConfig(tt.in); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
