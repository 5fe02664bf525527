package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/order"
)

func itoa(n int) string { return strconv.Itoa(n) }

type answer struct {
	Status  int
	OrderID string `json:"order_id"`
	State   string `json:"status"`
	Error   struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// newClient is a client for many concurrent orders whose every request and
// answer is validated against api/openapi.yaml.
func newClient(t testing.TB) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: apitest.Transport(t, &http.Transport{
		MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256,
	})}
}

// post sends an order. A keyed request whose answer was lost (a reset, a
// connection closed before the answer: a starved test machine does that)
// is sent again with the same key, as the README tells a buyer's client to:
// the retry gets the order's answer whatever the first copy did.
func post(t testing.TB, c *http.Client, url, key, body string) answer {
	t.Helper()
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		var a answer
		if a, err = postOnce(t, c, url, key, body); err == nil {
			return a
		}
		if key == "" {
			break
		}
		t.Logf("post order %s: %v; sending it again with the same key", key, err)
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	t.Errorf("post order: %v", err)
	return answer{}
}

// postOnce sends an order once; the error is the transport's (a
// non-JSON answer fails the test).
func postOnce(t testing.TB, c *http.Client, url, key, body string) (answer, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/orders", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Errorf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	a.Status = resp.StatusCode
	return a, nil
}

func orderBody(sku string, qty int, customer string) string {
	return fmt.Sprintf(`{"sku":%q,"qty":%d,"customer_id":%q}`, sku, qty, customer)
}

// TestFlashSale: 3,000 distinct buyers (300 of them sending their request
// twice at the same moment) race for 100 units.
func TestFlashSale(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("flash-")
	p.loadStock(t, sku, 100)
	const buyers, twins = 3000, 300
	c := newClient(t)
	answers := make([]answer, buyers+twins)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < buyers+twins; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := i % buyers // i >= buyers are the twins of buyers 0..299
			answers[i] = post(t, c, p.URL, "key-"+itoa(b), orderBody(sku, 1, sku+"-cust-"+itoa(b)))
		}(i)
	}
	wg.Wait()
	saleTook := time.Since(start)

	accepted := map[string]bool{}
	for i, a := range answers[:buyers] {
		switch {
		case a.Status == http.StatusAccepted:
			if accepted[a.OrderID] {
				t.Fatalf("order id %s accepted twice", a.OrderID)
			}
			accepted[a.OrderID] = true
		case a.Status != http.StatusConflict || a.Error.Code != "sold_out":
			t.Fatalf("buyer %d: %d %+v, want 202 or 409 sold_out", i, a.Status, a.Error)
		}
	}
	for i := buyers; i < buyers+twins; i++ {
		first, twin := answers[i-buyers], answers[i]
		if first.Status != twin.Status || first.OrderID != twin.OrderID {
			t.Fatalf("buyer %d and its retry disagree: %d %s vs %d %s", i-buyers, first.Status, first.OrderID, twin.Status, twin.OrderID)
		}
	}
	if len(accepted) != 100 {
		t.Fatalf("accepted %d orders, want 100", len(accepted))
	}

	testkit.WaitFor(t, "100 invoices", 60*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 100, err
	})
	lastInvoice := time.Since(start)
	t.Logf("3,000 buyers + 300 concurrent retries answered in %v; last invoice written %v after the first request", saleTook, lastInvoice)

	assertSoldOut(t, p, sku, accepted)
}

func assertSoldOut(t *testing.T, p *pipeline, sku string, accepted map[string]bool) {
	t.Helper()
	ctx := context.Background()
	rows := []string{}
	if err := p.DB.DB().SelectContext(ctx, &rows, "SELECT order_id FROM invoices WHERE sku = ?", sku); err != nil {
		t.Fatal(err)
	}
	for _, id := range rows {
		if !accepted[id] {
			t.Fatalf("invoice for order %s that was never accepted", id)
		}
	}
	prod, err := p.DB.Product(ctx, sku)
	if err != nil || prod.Sold != 100 {
		t.Fatalf("products.sold = %d (%v), want 100", prod.Sold, err)
	}
	testkit.WaitFor(t, "Redis to settle every reservation", 10*time.Second, func() (bool, error) {
		v, err := p.Stock.View(ctx, sku)
		return err == nil && v.Avail == 0 && v.Reserved == 0 && v.Sold == 100 && v.Consistent(), fmt.Errorf("%+v %v", v, err)
	})
	for id := range accepted {
		a := get(t, p.URL+"/v1/orders/"+id)
		if a.Status != http.StatusOK || a.State != string(order.StatusInvoiced) {
			t.Fatalf("GET order %s: %d %s", id, a.Status, a.State)
		}
		break
	}
}

func get(t *testing.T, url string) answer {
	t.Helper()
	resp, err := apitest.Client(t).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	a.Status = resp.StatusCode
	return a
}
