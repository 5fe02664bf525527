package idem_test

import (
	"context"
	"errors"
	"fmt"
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

	c, err := r.Claim(ctx, o, "k1")
	id := c.OrderID
	if err != nil || !c.Created || order.ValidateID(id) != nil {
		t.Fatalf("first claim: %+v err=%v, want a new order", c, err)
	}
	again, err := r.Claim(ctx, o, "k1")
	if err != nil || again.Created || again.OrderID != id {
		t.Fatalf("retry: %+v err=%v, want %q, not created", again, err, id)
	}
	if ok, err := r.Forget(ctx, again); ok || err != nil {
		t.Fatalf("forget by a retry: %v %v, want refused (it did not make the record)", ok, err)
	}
	other := o
	other.Qty = 3
	if _, err := r.Claim(ctx, other, "k1"); !errors.Is(err, order.ErrIdempotencyMismatch) {
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
	if ok, err := r.Forget(ctx, c); !ok || err != nil {
		t.Fatalf("forget by the claim that made it: %v %v", ok, err)
	}
	if _, err := r.Lookup(ctx, id); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("lookup after forget: %v, want ErrNotFound", err)
	}
}

// TestKeyReusedAfterItsRecordExpired: the same key, once its record is
// gone, names a new order (its window is later), not the order the key
// named before, which MySQL may hold; while the record lives a retry names
// the same order, across a window's end too.
func TestKeyReusedAfterItsRecordExpired(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl = time.Second
	r := idem.New(rdb, ttl)
	o := buy(customer(t, rdb, ttl, "k1"), 1)
	c, err := r.Claim(ctx, o, "k1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // the window may end meanwhile; the record lives
	again, err := r.Claim(ctx, o, "k1")
	if err != nil || again.Created || again.OrderID != c.OrderID {
		t.Fatalf("retry: %+v %v, want %q", again, err, c.OrderID)
	}
	time.Sleep(ttl + 100*time.Millisecond) // the record expires
	fresh, err := r.Claim(ctx, buy(o.CustomerID, 2), "k1")
	if err != nil || !fresh.Created || fresh.OrderID == c.OrderID {
		t.Fatalf("key reused after expiry: %+v %v, want a new order, not %q", fresh, err, c.OrderID)
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
	if c, err := r.Claim(ctx, o, "k1"); err != nil || !c.Created {
		t.Fatalf("claim run twice: %+v err=%v, want the record made by this claim", c, err)
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
		if cl, err := r.Claim(ctx, buy(c, 1), k); err != nil || !cl.Created {
			t.Fatalf("claim within the burst: %+v err=%v", cl, err)
		}
	}
	_, err := r.Claim(ctx, buy(c, 1), "k3")
	var rl *order.RateLimitedError
	if !errors.Is(err, order.ErrRateLimited) || !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > 100*time.Second {
		t.Fatalf("past the burst: %v, want a RateLimitedError with retry in (0, 100s]", err)
	}
	w := order.KeyWindow(c, "k3", time.Now(), time.Minute)
	if n, err := rdb.Exists(ctx, keys.Idem(order.IDFor(c, "k3", w))).Result(); err != nil || n != 0 {
		t.Fatalf("refused claim left a record (exists=%d, err %v)", n, err)
	}
	ttl, err := rdb.PTTL(ctx, keys.CustomerRate(c)).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("budget key ttl %v (err %v): idle customers would stay in memory", ttl, err)
	}
	if _, err := idem.New(rdb, time.Minute).Claim(ctx, buy(c, 1), "k3"); err != nil {
		t.Fatalf("unlimited records claim: %v", err)
	}
	fresh := customer(t, rdb, time.Minute, "k1")
	if _, err := r.Claim(ctx, buy(fresh, 1), "k1"); err != nil {
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

// markSoldOut rewrites the record c made as a gateway from before sold-out
// answers left no record marked it: '!' before the fingerprint.
func markSoldOut(t *testing.T, rdb *redis.ClusterClient, c order.Claim) {
	t.Helper()
	ctx := context.Background()
	v, err := rdb.Get(ctx, keys.Idem(c.OrderID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.SetArgs(ctx, keys.Idem(c.OrderID), "!"+v, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestClaimReadsAnOldSoldOutMarkAsARetry: a record an older gateway marked
// as answered sold out binds nothing now: a retry with the same body is a
// retry of that order (which reserved nothing, so it is judged anew),
// another body is still refused, the record still reads back as its
// order, and it names no order that may be taken.
func TestClaimReadsAnOldSoldOutMarkAsARetry(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute)
	o := buy(customer(t, rdb, time.Minute, "k1"), 1)
	c, err := r.Claim(ctx, o, "k1")
	if err != nil || !c.Created {
		t.Fatalf("first claim: %+v err=%v, want created", c, err)
	}
	markSoldOut(t, rdb, c)
	if again, err := r.Claim(ctx, o, "k1"); err != nil || again.Created || again.OrderID != c.OrderID {
		t.Fatalf("retry of a marked record: %+v %v, want a retry of %s", again, err, c.OrderID)
	}
	other := o
	other.SKU = "sku-2"
	if _, err := r.Claim(ctx, other, "k1"); !errors.Is(err, order.ErrIdempotencyMismatch) {
		t.Fatalf("other body: %v, want ErrIdempotencyMismatch", err)
	}
	want := o
	want.ID = c.OrderID
	if got, err := r.Lookup(ctx, c.OrderID); err != nil || got != want {
		t.Fatalf("lookup: %+v %v, want %+v", got, err, want)
	}
	if id, open, err := r.Existing(ctx, o, "k1"); err != nil || open || id != c.OrderID {
		t.Fatalf("existing: %s open=%v %v, want %s not open", id, open, err, c.OrderID)
	}
}

// TestRateLimitedRetryOfAnOpenOrder: a retry over the customer's budget is
// not "not taken" when its key names an order that may be accepted: the
// outcome is unknown. A new key, or a key an older gateway answered sold
// out, stays 429.
func TestRateLimitedRetryOfAnOpenOrder(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	r := idem.New(rdb, time.Minute).Limited(0.01, 2) // two requests, no refill
	c := customer(t, rdb, time.Minute, "open", "sold", "new")
	open, err := r.Claim(ctx, buy(c, 1), "open")
	if err != nil {
		t.Fatal(err)
	}
	sold, err := r.Claim(ctx, buy(c, 1), "sold")
	if err != nil {
		t.Fatal(err)
	}
	markSoldOut(t, rdb, sold)
	_, err = r.Claim(ctx, buy(c, 1), "open")
	var u *order.UnknownOutcomeError
	if !errors.As(err, &u) || u.OrderID != open.OrderID {
		t.Fatalf("retry of an open order over the budget: %v, want an unknown outcome for %s", err, open.OrderID)
	}
	for _, k := range []string{"sold", "new"} {
		if _, err := r.Claim(ctx, buy(c, 1), k); !errors.Is(err, order.ErrRateLimited) {
			t.Fatalf("key %s over the budget: %v, want rate limited", k, err)
		}
	}
}

// TestWindowsFollowTheRedisClock: two gateways whose clocks differ by
// 300ms. One claims a key 750ms into a second (its clock already in the
// next 1s window); after the record expires, the other reuses the key. The
// windows follow the master's clock, so the reuse names a new order, not
// the one MySQL may hold.
func TestWindowsFollowTheRedisClock(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl = time.Second
	ahead := idem.New(rdb, ttl).WithClock(func() time.Time { return time.Now().Add(300 * time.Millisecond) })
	exact := idem.New(rdb, ttl)
	o := buy(customer(t, rdb, ttl, "k1"), 1)
	for time.Now().UnixMilli()%1000 != 750 {
		time.Sleep(200 * time.Microsecond)
	}
	first, err := ahead.Claim(ctx, o, "k1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 50*time.Millisecond) // the record expires
	again, err := exact.Claim(ctx, o, "k1")
	if err != nil || !again.Created || again.OrderID == first.OrderID {
		t.Fatalf("key reused after expiry: %+v %v, want a new order, not %s", again, err, first.OrderID)
	}
}

// TestExistingDecidesByTheMastersClock: Existing answers the gateway's
// "not taken" (Refused), so it must find every live record whatever the
// gateway's clock says, as admit does: by the master's clock. A gateway
// one or two windows ahead or behind still finds the record the key made
// (in the master's current window or the one before), and for a key with
// no record names the order a claim would create.
func TestExistingDecidesByTheMastersClock(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl = time.Hour
	exact := idem.New(rdb, ttl)
	skewed := func(d time.Duration) *idem.Records {
		return exact.WithClock(func() time.Time { return time.Now().Add(d) })
	}
	c := customer(t, rdb, ttl, "cur", "prev", "new")
	o := buy(c, 1)
	made, err := exact.Claim(ctx, o, "cur")
	if err != nil {
		t.Fatal(err)
	}
	// A record made in the window before the master's current one (a
	// claim near the end of that window), as admit would have made it.
	prevID := previousWindowRecord(t, rdb, o, "prev", ttl)
	for _, skew := range []time.Duration{-2 * ttl, -ttl, 0, ttl, 2 * ttl} {
		r := skewed(skew)
		for key, want := range map[string]string{"cur": made.OrderID, "prev": prevID} {
			id, open, err := r.Existing(ctx, o, key)
			if err != nil || !open || id != want {
				t.Errorf("gateway clock %v off, key %s: id=%s open=%v err=%v, want open %s", skew, key, id, open, err, want)
			}
		}
		id, open, err := r.Existing(ctx, o, "new")
		if err != nil || open {
			t.Errorf("gateway clock %v off, new key: id=%s open=%v err=%v, want not open", skew, id, open, err)
			continue
		}
		if want := wouldCreate(t, rdb, ttl, o, "new"); id != want {
			t.Errorf("gateway clock %v off, new key: id %s, want %s (the one a claim creates now)", skew, id, want)
		}
	}
}

// previousWindowRecord writes the record a claim of key made in the window
// before the current one, and returns its order id.
func previousWindowRecord(t *testing.T, rdb *redis.ClusterClient, o order.Order, key string, ttl time.Duration) string {
	t.Helper()
	w := order.KeyWindow(o.CustomerID, key, time.Now(), ttl)
	id := order.IDFor(o.CustomerID, key, w-1)
	if err := rdb.Set(context.Background(), keys.Idem(id), o.Fingerprint()+"#n0", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	return id
}

// wouldCreate is the id a claim of key names now, found by claiming it
// and forgetting the record again.
func wouldCreate(t *testing.T, rdb *redis.ClusterClient, ttl time.Duration, o order.Order, key string) string {
	t.Helper()
	r := idem.New(rdb, ttl)
	c, err := r.Claim(context.Background(), o, key)
	if err != nil || !c.Created {
		t.Fatalf("claim %s: %+v %v", key, c, err)
	}
	if ok, err := r.Forget(context.Background(), c); !ok || err != nil {
		t.Fatalf("forget %s: %v %v", key, ok, err)
	}
	return c.OrderID
}

// TestLostRecordsDoNotAllCrossOneBoundary: a failover lost the records of
// keys claimed just before a window's end (here 4s windows), and their
// retries come moments later. Were every key's windows to begin at the
// same instant (multiples of 4s here, 00:00 UTC with the default 24h),
// every such retry would cross it and name a new order; each (customer,
// key) has its own phase, so only the few whose boundary falls between
// the claim and the retry do.
func TestLostRecordsDoNotAllCrossOneBoundary(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl, n = 4 * time.Second, 50
	r := idem.New(rdb, ttl)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprint("k", i)
	}
	o := buy(customer(t, rdb, ttl, ks...), 1)
	for time.Now().UnixMilli()%ttl.Milliseconds() != ttl.Milliseconds()-300 {
		time.Sleep(200 * time.Microsecond)
	}
	boundary := time.UnixMilli(time.Now().UnixMilli() + 300)
	first := make([]order.Claim, n)
	for i, k := range ks {
		c, err := r.Claim(ctx, o, k)
		if err != nil || !c.Created {
			t.Fatalf("claim %s: %+v %v", k, c, err)
		}
		first[i] = c
	}
	for _, c := range first { // lost in a failover
		if ok, err := r.Forget(ctx, c); !ok || err != nil {
			t.Fatalf("drop the record of %s: %v %v", c.OrderID, ok, err)
		}
	}
	for time.Now().Before(boundary.Add(100 * time.Millisecond)) { // past the shared boundary
		time.Sleep(200 * time.Microsecond)
	}
	renamed := 0
	for i, k := range ks {
		c, err := r.Claim(ctx, o, k)
		if err != nil {
			t.Fatalf("retry %s: %v", k, err)
		}
		if c.OrderID != first[i].OrderID {
			renamed++
		}
	}
	// About a tenth (400ms and the claims' time, of 4s) name a new
	// order; every one of them would with a boundary shared by all keys.
	if renamed > n*4/5 {
		t.Fatalf("%d of %d retries named a new order: the keys share their windows' boundary", renamed, n)
	}
}

// TestLiveRecordTwoWindowsBack: a record made under the windows of a
// gateway from before keys had phases can sit two of its key's windows
// back while it lives (a rolling upgrade). A live record names its order:
// a claim finds it as a retry, and Existing as open.
func TestLiveRecordTwoWindowsBack(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	const ttl = time.Hour
	r := idem.New(rdb, ttl)
	o := buy(customer(t, rdb, ttl, "old"), 1)
	w := order.KeyWindow(o.CustomerID, "old", time.Now(), ttl)
	id := order.IDFor(o.CustomerID, "old", w-2)
	if err := rdb.Set(ctx, keys.Idem(id), o.Fingerprint()+"#n0", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if got, open, err := r.Existing(ctx, o, "old"); err != nil || !open || got != id {
		t.Fatalf("existing: %s open=%v err=%v, want open %s", got, open, err, id)
	}
	if c, err := r.Claim(ctx, o, "old"); err != nil || c.Created || c.OrderID != id {
		t.Fatalf("claim: %+v %v, want a retry of %s", c, err, id)
	}
}
