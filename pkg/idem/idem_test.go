package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/idem"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// newOrder gives a fresh customer an order and removes its keys afterwards.
func newOrder(t *testing.T, rdb *redis.ClusterClient, qty int) order.Order {
	t.Helper()
	c := testenv.Unique("idem-")
	o := order.Order{ID: order.IDFor(c, "k1"), SKU: "sku-1", Qty: qty, CustomerID: c}
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Idem(o.ID), keys.CustomerRate(c)) })
	return o
}

func TestClaimRetryMismatchLookupForget(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute)
	o := newOrder(t, rdb, 2)

	if first, err := r.Claim(ctx, o, false); err != nil || !first {
		t.Fatalf("first claim: first=%v err=%v, want true", first, err)
	}
	if first, err := r.Claim(ctx, o, false); err != nil || first {
		t.Fatalf("retry: first=%v err=%v, want false and no error", first, err)
	}
	other := o
	other.Qty = 3
	if _, err := r.Claim(ctx, other, false); !errors.Is(err, order.ErrIdempotencyMismatch) {
		t.Fatalf("other body: %v, want ErrIdempotencyMismatch", err)
	}
	got, err := r.Lookup(ctx, o.ID)
	if err != nil || got != o {
		t.Fatalf("lookup: %+v %v, want %+v", got, err, o)
	}
	ttl, err := rdb.PTTL(ctx, keys.Idem(o.ID)).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("record ttl %v (err %v), want (0, 1m]", ttl, err)
	}
	if err := r.Forget(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(ctx, o.ID); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("lookup after forget: %v, want ErrNotFound", err)
	}
}

func TestLimitedRefusesPastBurstWithoutClaiming(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute).Limited(0.01, 2) // no refill during the test
	o := newOrder(t, rdb, 1)
	second := o
	second.ID = order.IDFor(o.CustomerID, "k2")
	third := o
	third.ID = order.IDFor(o.CustomerID, "k3")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Idem(second.ID), keys.Idem(third.ID)) })

	for _, x := range []order.Order{o, second} {
		if first, err := r.Claim(ctx, x, false); err != nil || !first {
			t.Fatalf("claim within the burst: first=%v err=%v", first, err)
		}
	}
	_, err := r.Claim(ctx, third, false)
	var rl *order.RateLimitedError
	if !errors.Is(err, order.ErrRateLimited) || !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > 100*time.Second {
		t.Fatalf("past the burst: %v, want a RateLimitedError with retry in (0, 100s]", err)
	}
	if n, err := rdb.Exists(ctx, keys.Idem(third.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("refused claim left a record (exists=%d, err %v)", n, err)
	}
	ttl, err := rdb.PTTL(ctx, keys.CustomerRate(o.CustomerID)).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("budget key ttl %v (err %v): idle customers would stay in memory", ttl, err)
	}
	if _, err := idem.New(rdb, time.Minute).Claim(ctx, third, false); err != nil {
		t.Fatalf("unlimited records claim: %v", err)
	}
	fresh := newOrder(t, rdb, 1)
	if _, err := r.Claim(ctx, fresh, false); err != nil {
		t.Fatalf("another customer refused (%v): budgets are per customer", err)
	}
}

func TestCustomerKeysShareOneSlot(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	o := newOrder(t, rdb, 1)
	a, err := rdb.ClusterKeySlot(ctx, keys.CustomerRate(o.CustomerID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	b, err := rdb.ClusterKeySlot(ctx, keys.Idem(o.ID)).Result()
	if err != nil || a != b {
		t.Fatalf("rate key slot %d, record slot %d (err %v): one script needs one slot", a, b, err)
	}
}

// TestClaimAnsweredSoldOut: a claim recorded as answered sold out gives a
// retry that answer again, still refuses another body, and reads back as
// the order it recorded.
func TestClaimAnsweredSoldOut(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute)
	o := newOrder(t, rdb, 1)

	if first, err := r.Claim(ctx, o, true); err != nil || !first {
		t.Fatalf("first claim: first=%v err=%v, want true", first, err)
	}
	for _, soldOut := range []bool{false, true} {
		if first, err := r.Claim(ctx, o, soldOut); first || !errors.Is(err, order.ErrSoldOut) {
			t.Fatalf("retry (soldOut=%v): first=%v err=%v, want ErrSoldOut", soldOut, first, err)
		}
	}
	other := o
	other.SKU = "sku-2"
	if _, err := r.Claim(ctx, other, false); !errors.Is(err, order.ErrIdempotencyMismatch) {
		t.Fatalf("other body: %v, want ErrIdempotencyMismatch", err)
	}
	if got, err := r.Lookup(ctx, o.ID); err != nil || got != o {
		t.Fatalf("lookup: %+v %v, want %+v", got, err, o)
	}

	// A record made without the mark stays a plain retry.
	plain := newOrder(t, rdb, 1)
	if _, err := r.Claim(ctx, plain, false); err != nil {
		t.Fatal(err)
	}
	if first, err := r.Claim(ctx, plain, true); first || err != nil {
		t.Fatalf("retry of an unmarked record: first=%v err=%v, want false, nil", first, err)
	}
}
