package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/app"
	"surge/pkg/ops"
)

// startPipelineWith is startPipeline with the gateway's configuration
// tuned first.
func startPipelineWith(t *testing.T, tune func(*app.GatewayConfig)) *pipeline {
	t.Helper()
	c := commonConfig(t)
	cfg := apptest.GatewayConfig(t, c, "test-token")
	tune(&cfg)
	url, g := startGatewayConfig(t, cfg)
	stopW := startWorker(t, c)
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", DB: openDB(t, c.MySQL.DSN),
		Stock: g.Stock, Cfg: c, stopW: stopW}
}

// restockBehindTheBack loads sku's stock as opsctl does, into MySQL and
// straight into Redis, not through this gateway (whose hints it does not
// drop), and returns once it is loaded.
func (p *pipeline) restockBehindTheBack(t *testing.T, sku string, n int) restock {
	t.Helper()
	begin := time.Now()
	ops := &ops.Stock{DB: p.DB, Redis: p.Stock}
	if _, err := ops.Load(context.Background(), sku, admin.LoadRequest{Stock: &n}); err != nil {
		t.Fatalf("restock %s to %d: %v", sku, n, err)
	}
	return restock{begin, time.Now()}
}

// timedAnswer is one order's answer with when it was sent and received.
type timedAnswer struct {
	who, sku  string
	sent, got time.Time
	status    int
}

// restock is when a restock behind the gateway's back began and ended:
// its units were in Redis from end on.
type restock struct{ begin, end time.Time }

// hammer posts orders for the SKU sku returns, from customer, rate a
// second, each on a new key, until ctx ends; it returns the answers'
// statuses counted. Its client is plain (no contract check) to keep the
// load on the machine at the rate asked.
func hammer(ctx context.Context, t *testing.T, url, customer string, rate int, sku func() string) func() map[int]int {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	var n atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Go(func() {
				body := orderBody(sku(), 1, customer)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/orders", bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("h-%d", n.Add(1)))
				resp, err := c.Do(req)
				if err != nil {
					return // the test is ending
				}
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				mu.Unlock()
			})
		}
	})
	return func() map[int]int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return counts
	}
}

// staleSoldOuts returns the 409s that broke the promise: sent after a
// restock of their SKU ended (restocks in order, per SKU), and received
// before an order was sent that got a unit, and was answered before the
// next restock began. That unit came from a restock no later than the
// first and stayed in avail until after its order was sent (nothing is
// released in these tests), so it lay there the whole time the 409 was
// being answered: no read made for it could have seen the SKU sold out
// (README: a 409 comes from a sighting made while the order was being
// answered). Only the order of events measured from outside decides, so
// a slow machine cannot make it fail.
func staleSoldOuts(answers []timedAnswer, restocks map[string][]restock) []timedAnswer {
	var stale []timedAnswer
	for _, a := range answers {
		if a.status != http.StatusConflict {
			continue
		}
		rs, k := restocks[a.sku], -1
		for i, r := range rs {
			if a.sent.After(r.end) {
				k = i
			}
		}
		if k < 0 {
			continue
		}
		var next time.Time // the next restock's beginning; zero: none
		if k+1 < len(rs) {
			next = rs[k+1].begin
		}
		for _, b := range answers {
			if b.sku == a.sku && b.status == http.StatusAccepted && b.sent.After(a.got) &&
				(next.IsZero() || b.got.Before(next)) {
				stale = append(stale, a)
				break
			}
		}
	}
	return stale
}

// TestSoldOutRefusedClient: one client hammers a sold-out SKU at about
// 800 orders a second, its customer's budget spent, while a unit comes
// back behind the gateway's back (a restock through opsctl). Buyers ask
// one after another, every 20 ms. The hammering takes nothing and keeps
// nobody out: its orders are answered sold out from reads (or 429 once a
// unit is back), and in every round the first buyer who asks after the
// restock gets the unit; no 409 is answered while a unit lay unsold.
func TestSoldOutRefusedClient(t *testing.T) {
	p := startPipelineWith(t, func(c *app.GatewayConfig) {
		c.RateLimit.CustomerRate, c.RateLimit.CustomerBurst = 0.001, 1 // one order per customer
	})
	c := newClient(t)
	// The bot's one admitted order is spent before it starts.
	warm := testenv.Unique("sighted-bot-warm-")
	p.loadStock(t, warm, 10)
	bot := testenv.Unique("bot-")
	for i := 0; ; i++ {
		a := post(t, c, p.URL, testenv.Unique("warm-"), orderBody(warm, 1, bot))
		if a.Status == http.StatusTooManyRequests {
			break
		}
		if i == 3 {
			t.Fatalf("the bot's customer is never refused: %+v", a)
		}
	}
	var current atomic.Value
	current.Store(warm)
	ctx, stop := context.WithCancel(context.Background())
	counted := hammer(ctx, t, p.URL, bot, 800, func() string { return current.Load().(string) })
	defer stop()

	const rounds = 30
	var answers []timedAnswer
	restocks := map[string][]restock{}
	for r := range rounds {
		sku := testenv.Unique("sighted-bot-")
		p.loadStock(t, sku, 1)
		current.Store(sku)
		if first := post(t, c, p.URL, "k", orderBody(sku, 1, testenv.Unique("c-"))); first.Status != http.StatusAccepted {
			t.Fatalf("round %d: the last unit: %+v, want 202", r, first)
		}
		waitUntil(t, 20*time.Millisecond) // the bot's orders see it sold out
		restocks[sku] = []restock{p.restockBehindTheBack(t, sku, 2)}
		sent := time.Now()
		a := post(t, c, p.URL, "k", orderBody(sku, 1, testenv.Unique("c-")))
		answers = append(answers, timedAnswer{who: "buyer", sku: sku, sent: sent, got: time.Now(), status: a.Status})
		if a.Status != http.StatusAccepted {
			t.Errorf("round %d: the first buyer after the restock: %+v, want the unit (202)", r, a)
		}
	}
	stop()
	bots := counted()
	t.Logf("bot answers %v", bots)
	if bots[http.StatusConflict] < 100 || bots[http.StatusAccepted] != 0 {
		t.Fatalf("bot answers %v, want hundreds of 409 and no unit", bots)
	}
	for _, a := range staleSoldOuts(answers, restocks) {
		t.Errorf("409 sent %v after the restock, answered while a unit of it lay unsold",
			a.sent.Sub(restocks[a.sku][0].end).Round(time.Millisecond))
	}
}

// TestSoldOutCrowd: forty customers hammer a sold-out SKU (each within or
// past its own budget) while units come back behind the gateway's back,
// and buyers ask every 20 ms. Every unit sells, and no 409 is answered
// while a unit lay unsold: every 409 sent after the restock came after
// the last unit was taken.
func TestSoldOutCrowd(t *testing.T) {
	p := startPipeline(t)
	c := newClient(t)
	sku := testenv.Unique("sighted-crowd-")
	p.loadStock(t, sku, 5)
	for i := range 5 {
		if a := post(t, c, p.URL, "k", orderBody(sku, 1, testenv.Unique("c-"))); a.Status != http.StatusAccepted {
			t.Fatalf("unit %d: %+v, want 202", i, a)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	var answers []timedAnswer
	record := func(who string, sent time.Time, a answer) {
		mu.Lock()
		answers = append(answers, timedAnswer{who: who, sku: sku, sent: sent, got: time.Now(), status: a.Status})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 40 {
		customer := testenv.Unique("crowd-")
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				sent := time.Now()
				a := post(t, c, p.URL, fmt.Sprintf("k%d", i), orderBody(sku, 1, customer))
				if ctx.Err() != nil {
					return
				}
				record("crowd", sent, a)
				time.Sleep(10 * time.Millisecond) // about 50 orders a second each, past the budget of 20
			}
		})
	}
	// The crowd asks on the sold-out SKU; then 5 units come back, twice.
	waitUntil(t, 300*time.Millisecond)
	var restocks []restock
	for round := range 2 {
		r := p.restockBehindTheBack(t, sku, 10+5*round)
		restocks = append(restocks, r)
		for time.Now().Before(r.end.Add(time.Second)) {
			sent := time.Now()
			record("buyer", sent, post(t, c, p.URL, "k", orderBody(sku, 1, testenv.Unique("buyer-"))))
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	sold, byWho := 0, map[string]map[int]int{}
	var saleLag []time.Duration
	for _, a := range answers {
		if byWho[a.who] == nil {
			byWho[a.who] = map[int]int{}
		}
		byWho[a.who][a.status]++
		if a.status == http.StatusAccepted && a.got.After(restocks[0].begin) {
			sold++
			r := restocks[0]
			if a.got.After(restocks[1].begin) {
				r = restocks[1]
			}
			saleLag = append(saleLag, a.got.Sub(r.end).Round(time.Millisecond))
		}
	}
	sort.Slice(saleLag, func(i, j int) bool { return saleLag[i] < saleLag[j] })
	t.Logf("answers by who and status %v; units sold, answered this long after their restock ended: %v", byWho, saleLag)
	if sold != 10 {
		t.Errorf("%d units sold after the restocks, want all 10", sold)
	}
	for _, a := range staleSoldOuts(answers, map[string][]restock{sku: restocks}) {
		t.Errorf("%s's 409 sent at %v answered while a restocked unit lay unsold (restocks %v)",
			a.who, a.sent, restocks)
	}
}

// waitUntil lets d pass on the clock.
func waitUntil(t *testing.T, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}
