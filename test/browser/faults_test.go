package browser

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"surge/internal/testenv"
	"surge/pkg/app"
)

// TestCheckoutRetriesThroughBrokerOutage: with the gateway cut off from
// RabbitMQ the order is answered 503 unavailable; the page says it is
// retrying, retries with the same Idempotency-Key after Retry-After until
// the broker is back (~2 s), and ends with one order, invoiced.
func TestCheckoutRetriesThroughBrokerOutage(t *testing.T) {
	p, proxy := startPipeline(t, options{Proxy: true})
	browser := newBrowser(t)
	sku := testenv.Unique("web-outage-")
	p.loadStock(t, sku, 3)
	customer := sku + "-patient"
	tb := newTab(t, browser, customer, p.checkoutURL(p.Page, sku, customer, nil))

	proxy.Cut()
	clicked := time.Now()
	if err := tb.buy(); err != nil {
		t.Fatal(err)
	}
	waitPost(t, tb, http.StatusServiceUnavailable)
	// The page reads the answer after the browser has it: wait for what
	// it says, as for outcome_unknown below.
	if s, ok := waitText(tb, "status", "retrying", 10*time.Second); !ok {
		t.Errorf("status while the broker is cut: %q, want it to say retrying", s)
	}
	tb.screenshot(t, "broker-outage-retrying")
	// The broker comes back once the page has retried into the outage.
	waitPosts(t, tb, http.StatusServiceUnavailable, 2)
	proxy.Restore()
	restored := time.Now()

	r, err := tb.outcome(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tb.screenshot(t, "broker-outage-"+r.Outcome)
	t.Logf("outcome %s %v after the click, %v after the restore; order requests %s", r.Outcome,
		time.Since(clicked).Round(time.Millisecond), time.Since(restored).Round(time.Millisecond),
		describePosts(tb.orderPosts(), clicked))
	if r.Outcome != "invoiced" {
		t.Fatalf("outcome %s: %q, want invoiced", r.Outcome, r.Text)
	}
	checkRetries(t, tb.orderPosts(), time.Second, false)
	p.checkBooks(t, sku, 3, 1)
	checkOneOrder(t, p, sku, customer, r.OrderID)
}

// TestCheckoutOutcomeUnknown: the broker takes the order but holds its
// confirm back (as under a memory alarm), so the gateway answers 503
// outcome_unknown with the order's id and Retry-After: 2. No worker runs
// yet, so the order is not settled when the page looks it up: the page
// keeps the key and retries after Retry-After; once confirms flow again
// (and a worker runs) it shows the order invoiced, the one MySQL holds,
// whether a retry or its reading of the order found it first.
func TestCheckoutOutcomeUnknown(t *testing.T) {
	p, proxy := startPipeline(t, options{Proxy: true, NoWorker: true, Gateway: func(c *app.GatewayConfig) {
		c.ConfirmTimeout = 500 * time.Millisecond
		c.PublishChannels = 1 // opened by the first order, before the stall
	}})
	browser := newBrowser(t)
	sku := testenv.Unique("web-unknown-")
	p.loadStock(t, sku, 4)
	warmUp(t, p, sku, sku+"-first")

	customer := sku + "-unsure"
	tb := newTab(t, browser, customer, p.checkoutURL(p.Page, sku, customer, nil))
	proxy.Stall()
	clicked := time.Now()
	if err := tb.buy(); err != nil {
		t.Fatal(err)
	}
	waitPost(t, tb, http.StatusServiceUnavailable)
	// The page looks the order up, then waits.
	if s, ok := waitText(tb, "status", "retrying", 10*time.Second); !ok {
		t.Errorf("status after outcome_unknown: %q, want it to say retrying", s)
	}
	tb.screenshot(t, "outcome-unknown-retrying")
	// Confirms flow again once the page has retried into the stall.
	waitPosts(t, tb, http.StatusServiceUnavailable, 2)
	proxy.Resume()
	p.StartWorker()

	r, err := tb.outcome(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tb.screenshot(t, "outcome-unknown-"+r.Outcome)
	t.Logf("outcome %s %v after the click; order requests %s", r.Outcome,
		time.Since(clicked).Round(time.Millisecond), describePosts(tb.orderPosts(), clicked))
	if r.Outcome != "invoiced" {
		t.Fatalf("outcome %s: %q, want invoiced", r.Outcome, r.Text)
	}
	checkRetries(t, tb.orderPosts(), 2*time.Second, true)
	p.checkBooks(t, sku, 4, 2)
	checkOneOrder(t, p, sku, customer, r.OrderID)
}

// warmUp places one order from Go, answered 202: it opens the gateway's
// publishing channel, which a stalled broker would not let it open.
func warmUp(t *testing.T, p *pipeline, sku, customer string) {
	t.Helper()
	body := fmt.Sprintf(`{"sku":%q,"qty":1,"customer_id":%q}`, sku, customer)
	req, _ := http.NewRequest(http.MethodPost, p.API+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "warm-up")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("warm-up order: %d, want 202", resp.StatusCode)
	}
}

// waitPost waits until the page got an answer with status to an order.
func waitPost(t *testing.T, tb *tab, status int64) {
	t.Helper()
	waitPosts(t, tb, status, 1)
}

// waitPosts waits until the page got n answers with status to its order
// requests.
func waitPosts(t *testing.T, tb *tab, status int64, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := 0
		for _, q := range tb.orderPosts() {
			if q.Status == status {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d answers %d, want %d: %+v", tb.name, got, status, n, tb.orderPosts())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the text of the element with id contains want, at
// most within, and returns that text, or the text last read and false.
// The page itself checks on every change of its DOM, so a state it shows
// only for a moment (a retry's countdown) is not missed between two reads.
func waitText(tb *tab, id, want string, within time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(tb.ctx, within+5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.PollFunction[string](`(id, want) => {
		const el = document.getElementById(id);
		const s = el ? el.innerText : '';
		return s.includes(want) ? s : null;
	}`, chromedp.WithPollingArgs(id, want), chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(within)))
	if err != nil {
		return tb.text(id), false
	}
	return s, true
}

// checkRetries checks the page's order requests: one Idempotency-Key
// throughout, refused with 503 before the last, answered 202, each retry
// at least minGap (Retry-After) after the one before. With readsOrder the
// last may be a 503 too: after outcome_unknown the page reads the order
// before it waits, and may find it settled with no retry left to send.
func checkRetries(t *testing.T, posts []post, minGap time.Duration, readsOrder bool) {
	t.Helper()
	last := len(posts) - 1
	ended := last >= 0 && (posts[last].Status == http.StatusAccepted || readsOrder && posts[last].Status == http.StatusServiceUnavailable)
	if len(posts) < 2 || posts[0].Status != http.StatusServiceUnavailable || !ended {
		t.Errorf("order requests %+v: want a 503 first and a retry answered 202 last (or 503, the order read settled: %v)", posts, readsOrder)
	}
	for i, q := range posts {
		if q.Key == "" || q.Key != posts[0].Key {
			t.Errorf("order requests %+v: want every retry under the first Idempotency-Key", posts)
			return
		}
		// Retry-After is in whole seconds; allow for timer slack.
		if i > 0 && q.At.Sub(posts[i-1].At) < minGap-50*time.Millisecond {
			t.Errorf("retry %d came %v after the one before, want at least %v (Retry-After)", i, q.At.Sub(posts[i-1].At), minGap)
		}
	}
}

// checkOneOrder checks that MySQL holds exactly one order of customer for
// sku, the one the page showed, invoiced.
func checkOneOrder(t *testing.T, p *pipeline, sku, customer, shown string) {
	t.Helper()
	var mine []placed
	for _, o := range p.orders(t, sku) {
		if o.Customer == customer {
			mine = append(mine, o)
		}
	}
	if len(mine) != 1 || mine[0].ID != shown || mine[0].Status != "invoiced" || mine[0].Invoice == 0 {
		t.Errorf("MySQL orders of %s: %+v, want only the page's order %s, invoiced", customer, mine, shown)
	}
}

// describePosts lists the order requests as "+0.0s 503, +1.1s 202".
func describePosts(posts []post, since time.Time) string {
	var b strings.Builder
	for i, q := range posts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "+%.1fs %d in %v", q.At.Sub(since).Seconds(), q.Status, q.Took.Round(time.Millisecond))
		if q.Failed != "" {
			b.WriteString(" " + q.Failed)
		}
	}
	return b.String()
}
