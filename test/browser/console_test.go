package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/chromedp/chromedp"

	"surge/internal/testenv"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// operator is the name the tests sign in with; every audit row of their
// changes must carry it.
const operator = "dana-ops"

// console is a browser tab on the gateway's operations console.
type console struct {
	t *testing.T
	// root is the whole test's T: SKUs loaded for it keep their Redis
	// keys until it ends, so later pages still show them.
	root *testing.T
	ctx  context.Context
	base string // the admin listener
}

func openConsole(t *testing.T, browser context.Context, admin string) *console {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// The first action opens the tab: with no timeout, or the tab would
	// close with the timeout's context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	c := &console{t: t, root: t, ctx: ctx, base: admin}
	c.do(chromedp.EmulateViewport(1360, 900))
	return c
}

// do runs browser actions, failing the test on error.
func (c *console) do(actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c.t.Fatalf("browser: %v (at %s)", err, c.location())
	}
}

func (c *console) location() string {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	l, _ := chromedp.Run(ctx, chromedp.Location())
	return l
}

// open navigates to path on the console and waits for its <main>.
func (c *console) open(path string) {
	c.t.Helper()
	c.do(chromedp.Navigate(c.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// click clicks the element matching the CSS selector and waits until the
// page it leads to has loaded: until then <main> is the old page's.
func (c *console) click(sel string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		c.t.Fatalf("browser: click %s: %v (at %s)", sel, err, c.location())
	}
	c.do(chromedp.WaitReady(chromedp.CSS("main")))
}

// eval evaluates a JavaScript expression.
func eval[T any](c *console, js string) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		c.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// text is the text of the first element matching the CSS selector ("" when
// none does).
func (c *console) text(sel string) string {
	c.t.Helper()
	return eval[string](c, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// waitText polls until the element's text satisfies ok.
func (c *console) waitText(sel, what string, within time.Duration, ok func(string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := c.text(sel)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %q is %q after %v (page %s)", what, sel, s, within, c.location())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloadUntil reloads path until the element's text satisfies ok: for
// what a page shows only when it is served (the dead letters, an order).
func (c *console) reloadUntil(path, sel, what string, within time.Duration, ok func(string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.open(path)
		if s := c.text(sel); ok(s) {
			return s
		} else if time.Now().After(deadline) {
			c.t.Fatalf("%s: %q is %q after %v", what, sel, s, within)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

var (
	consoleShotsOnce sync.Once
	consoleShotsDir  string
)

// shot saves a full-page PNG under var/screenshots/console (or
// $SURGE_SCREENSHOTS/console).
func (c *console) shot(name string) {
	c.t.Helper()
	consoleShotsOnce.Do(func() {
		base := os.Getenv("SURGE_SCREENSHOTS")
		if base == "" {
			base = filepath.Join("..", "..", "var", "screenshots")
		}
		consoleShotsDir = filepath.Join(base, "console")
		_ = os.MkdirAll(consoleShotsDir, 0o755)
	})
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(consoleShotsDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		c.t.Errorf("screenshot %s: %v", name, err)
	}
}

// signIn signs in through the form.
func (c *console) signIn(token string) {
	c.t.Helper()
	c.open("/console/")
	c.do(chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#operator-name"), operator),
		chromedp.SetValue(chromedp.CSS("#token"), token))
	c.click("#sign-in")
}

// TestConsole drives the operations console in headless Chromium against
// the real pipeline: sign in, watch a sale move on the board, replay a
// parked order after a dry run and see it invoiced with the operator in
// the audit log, discard a letter and restore it, dry-run a reconcile and
// read its plan, and find an order by customer and key. Each page is
// saved as a screenshot.
func TestConsole(t *testing.T) {
	p, _ := startPipeline(t, options{})
	browser := newBrowser(t)
	c := openConsole(t, browser, p.Admin)

	// Sign in: a wrong token is refused, then the right one lands on
	// the board.
	c.open("/console/")
	if !strings.Contains(c.location(), "/console/login") {
		t.Fatalf("without a session the board sent the browser to %s, want the sign-in page", c.location())
	}
	c.shot("01-sign-in")
	c.signIn("not-the-token")
	if msg := c.text("#login-error"); !strings.Contains(msg, "not the admin token") {
		t.Fatalf("sign-in with a wrong token: %q", msg)
	}
	c.signIn(adminToken)
	if got := c.text("#operator"); got != operator {
		t.Fatalf("signed in as %q, want %q (page %s)", got, operator, c.location())
	}

	t.Run("parked order replayed and invoiced", func(t *testing.T) { replayParked(t, c, p) })
	t.Run("discard and restore", func(t *testing.T) { discardRestore(t, c, p) })
	t.Run("reconcile dry run shows the plan", func(t *testing.T) { reconcilePlan(t, c, p) })
	t.Run("order lookup and health", func(t *testing.T) { lookupAndHealth(t, c, p) })
	t.Run("board moves during a sale", func(t *testing.T) { boardMoves(t, c, p) })
	t.Run("stock loads audited with their operator", func(t *testing.T) { stockLoads(t, c, p) })
	t.Run("refused without a session or CSRF token", func(t *testing.T) { refusals(t, p) })
}

// boardMoves sells units while the board is open and watches its figures
// change without a reload.
func boardMoves(t *testing.T, c *console, p *pipeline) {
	c.t = t
	sku := testenv.Unique("board-")
	c.open("/console/")
	eval[bool](c, `window.__noReload = true`)
	// Loaded while the board is open: it appears without a reload.
	p.loadStock(c.root, sku, 80)
	row := fmt.Sprintf(`tr[data-sku=%q] `, sku)
	c.waitText(row+`[data-f=mysql_sold]`, "the new SKU on the board", 5*time.Second, func(s string) bool { return s == "0" })

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 48 {
			buy(t, p, sku, fmt.Sprintf("%s-c%d", sku, i), "k1")
			time.Sleep(60 * time.Millisecond)
		}
	}()
	rate := c.waitText(row+`[data-f=accepted_per_sec]`, "accepted/s during the sale", 10*time.Second,
		func(s string) bool { f, _ := strconv.ParseFloat(s, 64); return f > 0 })
	// The trends: both sparklines drawn, live, with a rate above zero.
	c.waitText(`[data-t="accepted.peak"]`, "the accepted trend's peak", 10*time.Second,
		func(s string) bool { f, _ := strconv.ParseFloat(s, 64); return f > 0 })
	c.waitText(`[data-t="invoiced.peak"]`, "the invoiced trend's peak", 15*time.Second,
		func(s string) bool { f, _ := strconv.ParseFloat(s, 64); return f > 0 })
	for _, k := range []string{"accepted", "invoiced"} {
		c.waitText(`[data-t="`+k+`.last"]`, "the "+k+" trend", 10*time.Second, func(string) bool {
			pts := eval[string](c, `document.querySelector('svg.spark.`+k+` polyline').getAttribute('points')`)
			return len(strings.Fields(pts)) >= 4
		})
	}
	c.shot("02-board")
	<-done
	c.waitText(row+`[data-f=mysql_sold]`, "MySQL sold after the sale", 20*time.Second, func(s string) bool { return s == "48" })
	c.waitText(row+`[data-f=redis_sold]`, "Redis sold after the sale", 10*time.Second, func(s string) bool { return s == "48" })
	c.waitText(row+`[data-f=redis_avail]`, "Redis avail after the sale", 5*time.Second, func(s string) bool { return s == "32" })
	if !eval[bool](c, `window.__noReload === true`) {
		t.Fatal("the board reloaded: its figures must move live")
	}
	t.Logf("accepted/s seen on the board during the sale: %s", rate)
	if first := eval[string](c, `document.querySelector('#board tbody tr').dataset.sku`); first != sku {
		t.Errorf("the board's first SKU is %s, want %s, the one loaded last", first, sku)
	}
	c.open("/console/?q=" + sku)
	if n := eval[int](c, `document.querySelectorAll('#board tbody tr[data-sku]').length`); n != 1 {
		t.Errorf("searching %s shows %d SKUs, want 1", sku, n)
	}
	c.shot("03-board-search")

	c.click(row + `a`)
	c.waitText(`#sku-live`, "the SKU page's live figures", 5*time.Second, func(s string) bool { return strings.HasPrefix(s, "live ·") })
	if got := c.text(`#recent-orders tbody`); strings.Count(got, "invoiced") != 20 ||
		!strings.Contains(c.text(`#recent-orders tbody tr:first-child`), sku+"-c47") {
		t.Errorf("recent orders of %s: %q, want the last 20, invoiced, the newest first", sku, got)
	}
	c.shot("04-sku")
}

// stockLoads sets a SKU's stock from its console page: a stock below what
// is sold and reserved is refused and changes nothing; an accepted one is
// listed with the operator beside the admin API's first load.
func stockLoads(t *testing.T, c *console, p *pipeline) {
	c.t = t
	sku := testenv.Unique("loads-")
	p.loadStock(c.root, sku, 10)
	buy(t, p, sku, sku+"-c1", "k1")
	buy(t, p, sku, sku+"-c2", "k1")
	c.open("/console/skus/" + sku)
	c.do(chromedp.SetValue(chromedp.CSS("#load-stock"), "1"))
	c.click("#load-submit")
	if msg := c.text("#load-result"); !strings.Contains(msg, "Stock not loaded") || !strings.Contains(msg, "at least 2") {
		t.Errorf("a stock below the 2 units sold or reserved: %q, want it refused naming the floor", msg)
	}
	c.do(chromedp.SetValue(chromedp.CSS("#load-stock"), "60"))
	c.click("#load-submit")
	if msg := c.text("#load-result"); !strings.Contains(msg, "Stock set to 60") {
		t.Fatalf("load 60: %q", msg)
	}
	c.waitText(`[data-f=redis_stock]`, "Redis stock after the load", 5*time.Second, func(s string) bool { return s == "60" })
	// A purchase limit set from the same form: shown on the page, in MySQL.
	c.do(chromedp.SetValue(chromedp.CSS("#load-limit"), "2"))
	c.click("#load-submit")
	if msg := c.text("#load-result"); !strings.Contains(msg, "Stock set to 60") {
		t.Fatalf("load 60 with a limit of 2: %q", msg)
	}
	c.waitText(`[data-f=max_per_customer]`, "the limit per customer after the load", 5*time.Second, func(s string) bool { return s == "2" })
	var limit int
	if err := p.DB.DB().QueryRow(`SELECT max_per_customer FROM products WHERE sku = ?`, sku).Scan(&limit); err != nil || limit != 2 {
		t.Errorf("products.max_per_customer %d (%v), want 2", limit, err)
	}
	rows := eval[[]string](c, `[...document.querySelectorAll('#stock-loads tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim())`)
	if len(rows) != 3 || !strings.Contains(rows[0], operator+" console 60 60") || !strings.Contains(rows[1], operator+" console 10 60") || !strings.Contains(rows[2], "admin-api admin-api new 10") {
		t.Errorf("stock loads %q: want %s via console 60 -> 60 (the limit), 10 -> 60, then admin-api creating it with 10 (the refused one not listed)", rows, operator)
	}
	var actor, via string
	if err := p.DB.DB().QueryRow(`SELECT actor, via FROM stock_loads WHERE sku = ? ORDER BY id DESC LIMIT 1`, sku).Scan(&actor, &via); err != nil || actor != operator || via != "console" {
		t.Errorf("stock_loads' newest row: %s via %s (%v), want %s via console", actor, via, err, operator)
	}
	c.shot("13-stock-loads")
}

// buy places one order through the public API and wants 202.
func buy(t *testing.T, p *pipeline, sku, customer, key string) string {
	body := fmt.Sprintf(`{"sku":%q,"qty":1,"customer_id":%q}`, sku, customer)
	req, _ := http.NewRequest(http.MethodPost, p.API+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("order: %v", err)
		return ""
	}
	defer resp.Body.Close()
	var a struct {
		OrderID string `json:"order_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("order for %s: %d", customer, resp.StatusCode)
	}
	return a.OrderID
}

// park publishes straight to the order exchange, as another publisher
// than the gateway could: an order for a SKU MySQL does not know yet, and
// a body that is not an order. The worker parks both at once.
func park(t *testing.T, p *pipeline, o order.Order) {
	conn, err := queue.Dial(context.Background(), p.Cfg.AMQP.URL, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	topo := p.Cfg.AMQP.Topology()
	pub, err := queue.NewPublisher(conn, topo, queue.PublisherOptions{Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx := context.Background()
	if err := pub.Publish(ctx, o); err != nil {
		t.Fatal(err)
	}
	poison := amqp.Publishing{MessageId: "poison-" + o.SKU, DeliveryMode: amqp.Persistent, Body: []byte(`{"sku":`)}
	if err := pub.PublishRaw(ctx, topo.Exchange, topo.RoutingKey, poison); err != nil {
		t.Fatal(err)
	}
}

// replayParked finds a parked order, dry-runs its replay, replays it and
// sees it invoiced, with the operator in the audit log.
func replayParked(t *testing.T, c *console, p *pipeline) {
	c.t = t
	sku := testenv.Unique("late-")
	o := order.Order{ID: order.IDFor(sku+"-c", "k1", 0), SKU: sku, Qty: 2, CustomerID: sku + "-c"}
	park(t, p, o)
	c.reloadUntil("/console/dead-letters?sku="+sku, `#letters tbody`, "the parked order", 20*time.Second,
		func(s string) bool { return strings.Contains(s, o.ID) && strings.Contains(s, "unknown_sku") })
	c.shot("05-dead-letters")

	letter := fmt.Sprintf(`#letters tr[data-order=%q]`, o.ID)
	c.click(letter + ` td:nth-child(2) a`)
	if body := c.text("#letter-body"); !strings.Contains(body, o.ID) || !strings.Contains(c.text("#letter-headers"), "x-surge-reason") {
		t.Fatalf("the letter page shows body %q and headers %q", body, c.text("#letter-headers"))
	}
	c.shot("06-dead-letter")

	p.loadStock(c.root, sku, 10) // the SKU exists now: the replay can invoice it
	c.click("#replay")
	if n := c.text("#dry-run-notice"); !strings.Contains(n, "nothing was changed") {
		t.Fatalf("replay did not start with a dry run: %q", c.text("main"))
	}
	if got := c.text(`#action-report [data-f=outcome]`); got != "would_replay" {
		t.Fatalf("dry run says %q, want would_replay", got)
	}
	c.shot("07-replay-dry-run")
	c.click("#confirm")
	if got := c.text(`#action-report [data-f=outcome]`); got != "replayed" || c.text("#action-actor") != operator {
		t.Fatalf("replay: %q by %q, want replayed by %s", got, c.text("#action-actor"), operator)
	}

	c.reloadUntil("/console/orders/"+o.ID, "#order-status", "the replayed order", 20*time.Second,
		func(s string) bool { return s == "invoiced" })
	if path := c.text("#order-path"); !strings.Contains(path, "parked") || !strings.Contains(path, "replayed") ||
		!strings.Contains(path, operator) || !strings.Contains(path, "invoiced") {
		t.Errorf("order path: %q, want parked, replayed by %s, invoiced", path, operator)
	}
	if inv := c.text("#order-invoice"); !strings.HasPrefix(inv, "#") {
		t.Errorf("invoice: %q", inv)
	}
	c.shot("08-order")

	c.open("/console/dead-letters")
	audit := c.text("#audit tbody")
	if !strings.Contains(audit, operator) || !strings.Contains(audit, "replayed") || !strings.Contains(audit, o.ID) {
		t.Errorf("audit trail %q, want %s replayed by %s", audit, o.ID, operator)
	}
	var actor string
	if err := p.DB.DB().QueryRow(`SELECT actor FROM dlq_replays WHERE order_id = ? AND outcome = 'replayed'`, o.ID).Scan(&actor); err != nil || actor != operator {
		t.Errorf("dlq_replays for %s: actor %q, %v; want %s", o.ID, actor, err, operator)
	}
}

// discardRestore discards the poison letter (after a confirmation) and
// restores it from the kept copy.
func discardRestore(t *testing.T, c *console, p *pipeline) {
	c.t = t
	c.reloadUntil("/console/dead-letters?reason=malformed", `#letters tbody`, "the poison letter", 20*time.Second,
		func(s string) bool { return strings.Contains(s, "malformed") })
	id := eval[string](c, `document.querySelector('#letters tbody tr[data-id]').dataset.id`)
	sel := fmt.Sprintf(`#letters tr[data-id=%q] input.pick`, id)
	c.do(chromedp.Click(chromedp.CSS(sel)))
	c.click("#discard-selected")
	if !strings.Contains(c.text("main"), "A copy of each is kept") {
		t.Fatalf("discard did not ask for confirmation: %q", c.text("main"))
	}
	c.click("#confirm")
	if got := c.text(`#action-report [data-f=outcome]`); got != "discarded" {
		t.Fatalf("discard: %q", got)
	}
	c.reloadUntil("/console/dead-letters?view=discarded", `#letters tbody`, "the kept copy", 10*time.Second,
		func(s string) bool { return strings.Contains(s, id) })
	c.shot("09-discarded")
	c.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#letters tr[data-id=%q] input.pick`, id))))
	c.click("#restore-selected")
	if got := c.text(`#action-report [data-f=outcome]`); got != "restored" {
		t.Fatalf("restore: %q (%s)", got, c.text("main"))
	}
	c.open("/console/dead-letters?reason=malformed")
	if !strings.Contains(c.text("#letters tbody"), id) {
		t.Fatalf("the restored letter %s is not parked again: %q", id, c.text("#letters tbody"))
	}
	audit := c.text("#audit tbody")
	if !strings.Contains(audit, "discarded") || !strings.Contains(audit, "restored") {
		t.Errorf("audit trail %q, want the discard and the restore", audit)
	}
}

// reconcilePlan makes MySQL's stock differ from Redis's, dry-runs the
// reconcile from the SKU page and reads the plan, then runs it from the
// reconcile page and finds it in the history under the operator.
func reconcilePlan(t *testing.T, c *console, p *pipeline) {
	c.t = t
	sku := testenv.Unique("drift-")
	p.loadStock(c.root, sku, 10)
	if _, err := p.DB.DB().Exec(`UPDATE products SET stock = 15 WHERE sku = ?`, sku); err != nil {
		t.Fatal(err)
	}
	c.open("/console/skus/" + sku)
	c.click("#reconcile-dry")
	plan := c.text(`#reconcile-result`)
	if !strings.Contains(plan, "Dry run") || !strings.Contains(plan, "stock 10→15") || !strings.Contains(plan, "avail 10→15") {
		t.Fatalf("dry-run plan: %q, want Redis stock 10→15, avail 10→15", plan)
	}
	c.shot("10-reconcile-dry-run")
	if v, err := p.Stock.View(context.Background(), sku); err != nil || v.Stock != 10 {
		t.Fatalf("the dry run changed Redis: %+v, %v", v, err)
	}
	c.open("/console/reconcile?sku=" + sku)
	c.click("#reconcile-run")
	if got := c.text(`#reconcile-result [data-f=outcome]`); got != "repaired" {
		t.Fatalf("reconcile: %q", got)
	}
	hist := c.text("#history tbody")
	if !strings.Contains(hist, operator) || !strings.Contains(hist, "repair") || !strings.Contains(hist, "dry run") {
		t.Errorf("history %q, want the dry run and the repair by %s", hist, operator)
	}
	c.shot("11-reconcile-history")
	if v, err := p.Stock.View(context.Background(), sku); err != nil || v.Stock != 15 || v.Avail != 15 {
		t.Errorf("after the repair Redis holds %+v, %v; want stock and avail 15", v, err)
	}
}

// lookupAndHealth finds an order by customer and key, and reads the
// health page.
func lookupAndHealth(t *testing.T, c *console, p *pipeline) {
	c.t = t
	sku := testenv.Unique("find-")
	p.loadStock(c.root, sku, 5)
	customer := sku + "-alice"
	id := buy(t, p, sku, customer, "checkout-7f3a")
	c.open("/console/orders")
	c.do(chromedp.SetValue(chromedp.CSS("#lookup-customer"), customer), chromedp.SetValue(chromedp.CSS("#lookup-key"), "checkout-7f3a"))
	c.click("#lookup")
	if !strings.HasSuffix(c.location(), "/console/orders/"+id) {
		t.Fatalf("lookup by customer and key went to %s, want order %s", c.location(), id)
	}
	c.reloadUntil("/console/orders/"+id, "#order-status", "the order", 10*time.Second, func(s string) bool { return s == "invoiced" })

	c.open("/console/health")
	engines := c.text("#engines tbody")
	for _, e := range []string{"redis", "rabbitmq", "mysql"} {
		if !strings.Contains(engines, e) {
			t.Errorf("health lists no %s: %q", e, engines)
		}
	}
	if strings.Contains(engines, "down") {
		t.Errorf("an engine is down: %q", engines)
	}
	if q := c.text("#queues tbody"); !strings.Contains(q, p.Cfg.AMQP.DeadQueue) || !strings.Contains(q, ".retry.") {
		t.Errorf("queues: %q, want the dead queue and the retry tiers", q)
	}
	// No management API configured: the rates say n/a, and why.
	if q := c.text("#queues tbody"); !strings.Contains(q, "n/a") || !strings.Contains(c.text("#rates-note"), "SURGE_RABBITMQ_MANAGEMENT_URL") {
		t.Errorf("queue rates without the management API: %q, note %q; want n/a and the variable to set", q, c.text("#rates-note"))
	}
	nodes := c.text("#nodes tbody")
	if strings.Count(nodes, "master") < 3 || !strings.Contains(nodes, "replica") {
		t.Errorf("node map: %q, want 3 masters and their replicas", nodes)
	}
	c.shot("12-health")
}

// refusals: pages without a session go to the sign-in page, the live
// JSON answers 401, and a change without a session or with a wrong CSRF
// token is refused with 403, changing nothing.
func refusals(t *testing.T, p *pipeline) {
	noRedirect := func(req *http.Request, via []*http.Request) error { return http.ErrUseLastResponse }
	anon := &http.Client{CheckRedirect: noRedirect}
	status := func(c *http.Client, method, path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, p.Admin+path, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location") + string(b)
	}
	if code, loc := status(anon, http.MethodGet, "/console/dead-letters", nil); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/login") {
		t.Errorf("GET without a session: %d %q, want 303 to the sign-in page", code, loc)
	}
	if code, _ := status(anon, http.MethodGet, "/console/api/board", nil); code != http.StatusUnauthorized {
		t.Errorf("board JSON without a session: %d, want 401", code)
	}
	if code, _ := status(anon, http.MethodPost, "/console/reconcile", url.Values{"mode": {"run"}}); code != http.StatusForbidden {
		t.Errorf("POST without a session: %d, want 403", code)
	}

	jar, _ := cookiejar.New(nil)
	signed := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	if code, _ := status(signed, http.MethodPost, "/console/login", url.Values{"operator": {operator}, "token": {adminToken}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", code)
	}
	var before int
	_ = p.DB.DB().QueryRow(`SELECT COUNT(*) FROM reconcile_repairs`).Scan(&before)
	for _, csrf := range []string{"", "forged"} {
		code, body := status(signed, http.MethodPost, "/console/reconcile", url.Values{"mode": {"run"}, "csrf": {csrf}})
		if code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("POST with CSRF token %q: %d, want 403 naming the CSRF check", csrf, code)
		}
	}
	var after int
	_ = p.DB.DB().QueryRow(`SELECT COUNT(*) FROM reconcile_repairs`).Scan(&after)
	if after != before {
		t.Errorf("refused requests reconciled: %d repairs recorded, want none", after-before)
	}
	// The same form with the session's token is accepted.
	code, page := status(signed, http.MethodGet, "/console/reconcile", nil)
	i := strings.Index(page, `name="csrf" value="`)
	if code != http.StatusOK || i < 0 {
		t.Fatalf("reconcile page: %d", code)
	}
	token := page[i+len(`name="csrf" value="`):]
	token = token[:strings.IndexByte(token, '"')]
	if code, _ := status(signed, http.MethodPost, "/console/reconcile", url.Values{"mode": {"dry"}, "csrf": {token},
		"sku": {testenv.Unique("nosuch-")}}); code != http.StatusOK {
		t.Errorf("POST with the session's CSRF token: %d, want 200", code)
	}
}
