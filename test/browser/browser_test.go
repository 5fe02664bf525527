// Package browser drives the reference checkout (examples/checkout) in
// headless Chromium against the real pipeline: buyers click Buy, and the
// page must say what became of each order, as the gateway's answers
// promise. Chromium is Debian's (/usr/bin/chromium, installed by
// deploy/install-deps.sh); without it the tests skip locally and fail when
// CI is set.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless Chromium on a fresh profile for the test
// and returns its context; tabs are children of it (newTab). The flags
// keep the browser off the network: this machine reaches no outside host,
// and Chromium's background connections would only be refused.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		var lerr error
		if path, lerr = exec.LookPath("chromium"); lerr != nil {
			msg := fmt.Sprintf("chromium is not installed (%v); install it with deploy/install-deps.sh or apt-get install chromium", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	profile, err := os.MkdirTemp("", "surge-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(900, 760),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser to exit
		_ = os.RemoveAll(profile)
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab is one buyer: a browser tab with the checkout page, and the order
// requests it sent as the browser saw them.
type tab struct {
	ctx  context.Context
	name string

	mu    sync.Mutex
	posts []*post
	byID  map[network.RequestID]*post
}

// post is one POST /v1/orders the page sent.
type post struct {
	At     time.Time
	Key    string // its Idempotency-Key
	Status int64  // the answer's status; 0 when none came
	Took   time.Duration
	Failed string // the network error, e.g. a CORS refusal
}

// result is what #result says.
type result struct {
	Outcome  string `json:"outcome"`
	OrderID  string `json:"orderId"`
	Attempts string `json:"attempts"`
	Text     string `json:"text"`
}

// newTab opens pageURL in a new tab and waits until the product is shown
// (or failed to load), recording the page's order requests.
func newTab(t *testing.T, browser context.Context, name, pageURL string) *tab {
	t.Helper()
	tb, err := openTab(t, browser, name, pageURL)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// openTabs opens one tab per name, a few at a time.
func openTabs(t *testing.T, browser context.Context, names []string, pageURL func(name string) string) []*tab {
	t.Helper()
	tabs := make([]*tab, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			tabs[i], errs[i] = openTab(t, browser, name, pageURL(name))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return tabs
}

// openTab is newTab for any goroutine: it reports instead of failing.
func openTab(t *testing.T, browser context.Context, name, pageURL string) (*tab, error) {
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx, name: name, byID: map[network.RequestID]*post{}}
	if err := chromedp.Listen(ctx, tb.record); err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(`#product:not([data-state="loading"])`)),
	); err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", name, pageURL, err)
	}
	return tb, nil
}

// record runs in the tab's event loop: it only files the events.
func (tb *tab) record(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request.Method != "POST" || !strings.HasSuffix(ev.Request.URL, "/v1/orders") {
			return
		}
		p := &post{At: time.Now()}
		for k, v := range ev.Request.Headers {
			if strings.EqualFold(k, "Idempotency-Key") {
				p.Key = fmt.Sprint(v)
			}
		}
		tb.posts = append(tb.posts, p)
		tb.byID[ev.RequestID] = p
	case *network.EventResponseReceived:
		if p := tb.byID[ev.RequestID]; p != nil {
			p.Status = ev.Response.Status
			p.Took = time.Since(p.At)
		}
	case *network.EventLoadingFailed:
		if p := tb.byID[ev.RequestID]; p != nil {
			p.Failed = ev.ErrorText
			if ev.CorsErrorStatus != nil {
				p.Failed += " (CORS: " + string(ev.CorsErrorStatus.CorsError) + ")"
			}
		}
	}
}

// orderPosts returns a copy of the order requests so far.
func (tb *tab) orderPosts() []post {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := make([]post, len(tb.posts))
	for i, p := range tb.posts {
		out[i] = *p
	}
	return out
}

// buy clicks the Buy button.
func (tb *tab) buy() error {
	tctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.ID("buy"))); err != nil {
		return fmt.Errorf("%s: click Buy: %w", tb.name, err)
	}
	return nil
}

const readResult = `(() => {
	const r = document.getElementById('result');
	return r.dataset.outcome ? {outcome: r.dataset.outcome, orderId: r.dataset.orderId || '',
		attempts: r.dataset.attempts || '', text: r.innerText} : null;
})()`

// outcome waits until the page shows an outcome and returns it.
func (tb *tab) outcome(within time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(tb.ctx, within+5*time.Second)
	defer cancel()
	r, err := chromedp.Run(ctx, chromedp.Poll[result](readResult,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('status').innerText`))
		return r, fmt.Errorf("%s: no outcome within %v (status %q, order requests %+v): %w",
			tb.name, within, status, tb.orderPosts(), err)
	}
	return r, nil
}

// text returns the text of the element with id.
func (tb *tab) text(id string) string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('`+id+`').innerText`))
	return s
}

var (
	shotsOnce sync.Once
	shotsDir  string
	shotsErr  error
)

// screenshot saves a PNG of the tab to $SURGE_SCREENSHOTS (default:
// var/screenshots/browser in the checkout, each run replacing the last)
// and logs its path, for a person to look at.
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	shotsOnce.Do(func() {
		shotsDir = os.Getenv("SURGE_SCREENSHOTS")
		if shotsDir == "" {
			shotsDir = filepath.Join("..", "..", "var", "screenshots", "browser")
		}
		shotsErr = os.MkdirAll(shotsDir, 0o755)
	})
	if shotsErr != nil {
		t.Errorf("screenshot directory: %v", shotsErr)
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("%s: screenshot: %v", tb.name, err)
		return
	}
	path := filepath.Join(shotsDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("%s: screenshot: %v", tb.name, err)
		return
	}
	t.Logf("screenshot: %s", path)
}
