package browser

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestCheckoutFlashSale: 20 buyers, each in their own tab, click Buy on a
// product with 5 units. Five pages say the order is confirmed with an
// invoice, fifteen say sold out, none shows an error; MySQL and Redis
// agree on 5 sold.
func TestCheckoutFlashSale(t *testing.T) {
	const buyers, units = 20, 5
	start := time.Now()
	p, _ := startPipeline(t, options{})
	browser := newBrowser(t)
	sku := testenv.Unique("web-flash-")
	p.loadStock(t, sku, units)

	customers := make([]string, buyers)
	for i := range customers {
		customers[i] = fmt.Sprintf("%s-buyer-%02d", sku, i)
	}
	tabs := openTabs(t, browser, customers, func(customer string) string {
		return p.checkoutURL(p.Page, sku, customer, url.Values{"deadline": {"30"}})
	})
	if got := tabs[0].text("product-left"); got != fmt.Sprintf("%d left", units) {
		t.Errorf("product shows %q left, want %q", got, fmt.Sprintf("%d left", units))
	}
	opened := time.Now()
	results := make([]result, buyers)
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i, tb := range tabs {
		wg.Go(func() {
			if errs[i] = tb.buy(); errs[i] == nil {
				results[i], errs[i] = tb.outcome(45 * time.Second)
			}
		})
	}
	wg.Wait()
	clicked := time.Since(opened)

	count := map[string]int{}
	ids := map[string]string{} // order id -> customer
	firstOf := map[string]int{}
	for i, r := range results {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		count[r.Outcome]++
		if _, ok := firstOf[r.Outcome]; !ok {
			firstOf[r.Outcome] = i
		}
		switch r.Outcome {
		case "invoiced":
			if !strings.Contains(r.Text, "Your order is confirmed (invoice #") {
				t.Errorf("%s: invoiced page says %q", tabs[i].name, r.Text)
			}
			ids[r.OrderID] = tabs[i].name
		case "sold_out":
			if !strings.Contains(r.Text, "Sold out") {
				t.Errorf("%s: sold-out page says %q", tabs[i].name, r.Text)
			}
		default:
			t.Errorf("%s: outcome %s: %q", tabs[i].name, r.Outcome, r.Text)
		}
	}
	if count["invoiced"] != units || count["sold_out"] != buyers-units {
		t.Errorf("outcomes %v, want %d invoiced and %d sold_out", count, units, buyers-units)
	}
	for _, name := range []string{"invoiced", "sold_out"} {
		if i, ok := firstOf[name]; ok {
			tabs[i].screenshot(t, "flash-sale-"+name)
		}
	}
	p.checkBooks(t, sku, units, units)
	for _, o := range p.orders(t, sku) {
		if ids[o.ID] != o.Customer || o.Status != "invoiced" || o.Invoice == 0 {
			t.Errorf("MySQL order %+v: the pages showed %v", o, ids)
		}
	}
	t.Logf("%d buyers, %d units: %v; pipeline and %d tabs ready in %v, every outcome shown %v after the clicks",
		buyers, units, count, buyers, opened.Sub(start).Round(time.Millisecond), clicked.Round(time.Millisecond))
}

// TestCheckoutCORS: the checkout on the allowed origin buys; the same page
// served from another origin is refused by the browser, says so, and
// places no order.
func TestCheckoutCORS(t *testing.T) {
	p, _ := startPipeline(t, options{})
	browser := newBrowser(t)
	sku := testenv.Unique("web-cors-")
	p.loadStock(t, sku, 5)
	other := servePage(t) // another port: another origin, not allowed

	checkCORSHeaders(t, p, sku, other)

	blockedCustomer := sku + "-elsewhere"
	blocked := newTab(t, browser, blockedCustomer, p.checkoutURL(other, sku, blockedCustomer, url.Values{"deadline": {"4"}}))
	if s := blocked.text("product-error"); !strings.Contains(s, "could not be reached") {
		t.Errorf("product on a refused origin: %q, want it to say the shop could not be reached", s)
	}
	if err := blocked.buy(); err != nil {
		t.Fatal(err)
	}
	r, err := blocked.outcome(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	blocked.screenshot(t, "cors-refused-origin-"+r.Outcome)
	if r.Outcome != "error" || !strings.Contains(r.Text, "Your order could not be completed") {
		t.Errorf("refused origin: outcome %s %q, want error", r.Outcome, r.Text)
	}
	for _, q := range blocked.orderPosts() {
		if q.Status != 0 {
			t.Errorf("refused origin: the page read an answer %+v", q)
		}
	}

	allowedCustomer := sku + "-here"
	allowed := newTab(t, browser, allowedCustomer, p.checkoutURL(p.Page, sku, allowedCustomer, url.Values{"deadline": {"20"}}))
	if err := allowed.buy(); err != nil {
		t.Fatal(err)
	}
	r, err = allowed.outcome(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	allowed.screenshot(t, "cors-allowed-origin-"+r.Outcome)
	if r.Outcome != "invoiced" {
		t.Fatalf("allowed origin: outcome %s %q, want invoiced", r.Outcome, r.Text)
	}
	p.checkBooks(t, sku, 5, 1)
	if orders := p.orders(t, sku); len(orders) != 1 || orders[0].Customer != allowedCustomer {
		t.Errorf("MySQL orders %+v, want only %s's", orders, allowedCustomer)
	}
}

// checkCORSHeaders checks the gateway's CORS answers the page relies on:
// a preflight from the allowed origin names it and the order headers, and
// one from another origin gets no CORS header.
func checkCORSHeaders(t *testing.T, p *pipeline, sku, other string) {
	t.Helper()
	preflight := func(origin string) http.Header {
		req, _ := http.NewRequest(http.MethodOptions, p.API+"/v1/orders", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,idempotency-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header
	}
	h := preflight(p.Page)
	if h.Get("Access-Control-Allow-Origin") != p.Page ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "idempotency-key") {
		t.Errorf("preflight from %s: %v, want it allowed with Idempotency-Key", p.Page, h)
	}
	if h := preflight(other); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from %s (not allowed): %v, want no CORS header", other, h)
	}
	req, _ := http.NewRequest(http.MethodGet, p.API+"/v1/products/"+sku, nil)
	req.Header.Set("Origin", p.Page)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	exposed := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	for _, want := range []string{"location", "retry-after"} {
		if !strings.Contains(exposed, want) {
			t.Errorf("GET from %s exposes %q, want %s among them", p.Page, exposed, want)
		}
	}
}
