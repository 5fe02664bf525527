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

// customer gives a test a fresh customer and removes its keys afterwards
// (the records of the keys it names, in the windows around now).
func customer(t *testing.T, rdb *redis.ClusterClient, ttl time.Duration, idemKeys ...string) string {
	t.Helper()
	c := testenv.Unique("idem-")
	t.Cleanup(func() {
		w := order.Window(time.Now(), ttl)
		ks := []string{keys.CustomerRate(c)}
		for _, k := range idemKeys {
			for d := int64(-3); d <= 3; d++ {
				ks = append(ks, keys.Idem(order.IDFor(c, k, w+d)))
			}
		}
		for _, k := range ks {
			rdb.Del(context.Background(), k)
		}
	})
	return c
}

func buy(c string, qty int) order.Order {
	return order.Order{SKU: "sku-1", Qty: qty, CustomerID: c}
}

func TestClaimRetryMismatchLookupForget(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute)
	o := buy(customer(t, rdb, time.Minute, "k1"), 2)

	id, first, err := r.Claim(ctx, o, "k1", false)
	if err != nil || !first || order.ValidateID(id) != nil {
		t.Fatalf("first claim: %q first=%v err=%v, want a new order", id, first, err)
	}
	again, first, err := r.Claim(ctx, o, "k1", false)
	if err != nil || first || again != id {
		t.Fatalf("retry: %q first=%v err=%v, want %q, not first", again, first, err, id)
	}
	other := o
	other.Qty = 3
	if _, _, err := r.Claim(ctx, other, "k1", false); !errors.Is(err, order.ErrIdempotencyMismatch) {
		t.Fatalf("other body: %v, want ErrIdempotencyMismatch", err)
	}
	o.ID = id
	got, err := r.Lookup(ctx, id)
	if err != nil || got != o {
		t.Fatalf("lookup: %+v %v, want %+v", got, err, o)
	}
	ttl, err := rdb.PTTL(ctx, keys.Idem(id)).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("record ttl %v (err %v), want (0, 1m]", ttl, err)
	}
	if err := r.Forget(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(ctx, id); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("lookup after forget: %v, want ErrNotFound", err)
	}
}

// TestKeyReusedAfterItsRecordExpired: the same key, once its record is
// gone, names a new order (its window is later), not the order the key
// named before, which MySQL may hold; within its life the record is found
// from the neighbouring windows too, so a retry across a window's end
// names the same order.
func TestKeyReusedAfterItsRecordExpired(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl = time.Hour
	now := time.Now()
	r := idem.New(rdb, ttl).WithClock(func() time.Time { return now })
	o := buy(customer(t, rdb, ttl, "k1"), 1)
	first, _, err := r.Claim(ctx, o, "k1", false)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(ttl - time.Second) // the next window, the record alive
	if id, created, err := r.Claim(ctx, o, "k1", false); err != nil || created || id != first {
		t.Fatalf("retry in the next window: %q created=%v %v, want %q", id, created, err, first)
	}
	if err := rdb.Del(ctx, keys.Idem(first)).Err(); err != nil { // the record expires
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	reused := buy(o.CustomerID, 2)
	id, created, err := r.Claim(ctx, reused, "k1", false)
	if err != nil || !created || id == first {
		t.Fatalf("key reused after expiry: %q created=%v %v, want a new order, not %q", id, created, err, first)
	}
}

// TestClaimRepeatedByTheClient: go-redis runs a script again when its
// reply timed out. A claim that ran twice must still say it created the
// record and spend the budget once; this repeats the exact call through a
// client that sends every EVALSHA twice and returns the second reply.
func TestClaimRepeatedByTheClient(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	twice := &doubler{ClusterClient: rdb}
	r := idem.New(twice, time.Minute).Limited(0.01, 1) // one request, no refill
	o := buy(customer(t, rdb, time.Minute, "k1"), 1)
	if _, first, err := r.Claim(ctx, o, "k1", false); err != nil || !first {
		t.Fatalf("claim run twice: first=%v err=%v, want the record made by this claim", first, err)
	}
}

// doubler runs each script twice, as a retry after a lost reply does.
type doubler struct{ *redis.ClusterClient }

func (d *doubler) EvalSha(ctx context.Context, sha string, ks []string, args ...any) *redis.Cmd {
	d.ClusterClient.EvalSha(ctx, sha, ks, args...)
	return d.ClusterClient.EvalSha(ctx, sha, ks, args...)
}

func TestLimitedRefusesPastBurstWithoutClaiming(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute).Limited(0.01, 2) // no refill during the test
	c := customer(t, rdb, time.Minute, "k1", "k2", "k3")
	for _, k := range []string{"k1", "k2"} {
		if _, first, err := r.Claim(ctx, buy(c, 1), k, false); err != nil || !first {
			t.Fatalf("claim within the burst: first=%v err=%v", first, err)
		}
	}
	_, _, err := r.Claim(ctx, buy(c, 1), "k3", false)
	var rl *order.RateLimitedError
	if !errors.Is(err, order.ErrRateLimited) || !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > 100*time.Second {
		t.Fatalf("past the burst: %v, want a RateLimitedError with retry in (0, 100s]", err)
	}
	w := order.Window(time.Now(), time.Minute)
	if n, err := rdb.Exists(ctx, keys.Idem(order.IDFor(c, "k3", w))).Result(); err != nil || n != 0 {
		t.Fatalf("refused claim left a record (exists=%d, err %v)", n, err)
	}
	ttl, err := rdb.PTTL(ctx, keys.CustomerRate(c)).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("budget key ttl %v (err %v): idle customers would stay in memory", ttl, err)
	}
	if _, _, err := idem.New(rdb, time.Minute).Claim(ctx, buy(c, 1), "k3", false); err != nil {
		t.Fatalf("unlimited records claim: %v", err)
	}
	fresh := customer(t, rdb, time.Minute, "k1")
	if _, _, err := r.Claim(ctx, buy(fresh, 1), "k1", false); err != nil {
		t.Fatalf("another customer refused (%v): budgets are per customer", err)
	}
}

func TestCustomerKeysShareOneSlot(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	c := testenv.Unique("idem-")
	a, err := rdb.ClusterKeySlot(ctx, keys.CustomerRate(c)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for w := int64(0); w < 3; w++ {
		b, err := rdb.ClusterKeySlot(ctx, keys.Idem(order.IDFor(c, "k", w))).Result()
		if err != nil || a != b {
			t.Fatalf("rate key slot %d, record slot %d (err %v): one script needs one slot", a, b, err)
		}
	}
}

// TestClaimAnsweredSoldOut: a claim recorded as answered sold out gives a
// retry that answer again, still refuses another body, and reads back as
// the order it recorded.
func TestClaimAnsweredSoldOut(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute)
	o := buy(customer(t, rdb, time.Minute, "k1", "k2"), 1)

	id, first, err := r.Claim(ctx, o, "k1", true)
	if err != nil || !first {
		t.Fatalf("first claim: first=%v err=%v, want true", first, err)
	}
	for _, soldOut := range []bool{false, true} {
		if _, first, err := r.Claim(ctx, o, "k1", soldOut); first || !errors.Is(err, order.ErrSoldOut) {
			t.Fatalf("retry (soldOut=%v): first=%v err=%v, want ErrSoldOut", soldOut, first, err)
		}
	}
	other := o
	other.SKU = "sku-2"
	if _, _, err := r.Claim(ctx, other, "k1", false); !errors.Is(err, order.ErrIdempotencyMismatch) {
		t.Fatalf("other body: %v, want ErrIdempotencyMismatch", err)
	}
	want := o
	want.ID = id
	if got, err := r.Lookup(ctx, id); err != nil || got != want {
		t.Fatalf("lookup: %+v %v, want %+v", got, err, want)
	}

	// A record made without the mark stays a plain retry.
	if _, _, err := r.Claim(ctx, o, "k2", false); err != nil {
		t.Fatal(err)
	}
	if _, first, err := r.Claim(ctx, o, "k2", true); first || err != nil {
		t.Fatalf("retry of an unmarked record: first=%v err=%v, want false, nil", first, err)
	}
}
