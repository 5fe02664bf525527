package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// putBody sends PUT /v1/admin/stock/{sku} with body and returns the answer.
func (p *pipeline) putBody(t *testing.T, sku, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, p.Admin+"/v1/admin/stock/"+sku, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token)
	return do(t, apitest.Client(t), req)
}

// loadLimited loads a new SKU with n units and a purchase limit.
func (p *pipeline) loadLimited(t *testing.T, sku string, n, limit int) {
	t.Helper()
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	if a := p.putBody(t, sku, fmt.Sprintf(`{"stock":%d,"price_cents":100,"max_per_customer":%d}`, n, limit)); a.Status != http.StatusOK {
		t.Fatalf("load %s: %+v", sku, a)
	}
}

// postAll posts one order of qty 1 per key at once and returns the answers.
func postAll(t *testing.T, p *pipeline, sku, customer string, keys []string) []answer {
	t.Helper()
	c := newClient(t)
	out := make([]answer, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { out[i] = post(t, c, p.URL, k, orderBody(sku, 1, customer)) })
	}
	wg.Wait()
	return out
}

func waitLimitSettled(t *testing.T, p *pipeline, ids []string) map[string]int {
	t.Helper()
	var st map[string]int
	testkit.WaitFor(t, "orders settled", 60*time.Second, func() (bool, error) {
		var err error
		st, err = testkit.OrderStatuses(context.Background(), p.DB, ids)
		return err == nil && st["invoiced"]+st["rejected"] == len(ids), fmt.Errorf("%v of %d (%v)", st, len(ids), err)
	})
	return st
}

// invoicedUnits sums what MySQL invoiced to customer of sku.
func invoicedUnits(t *testing.T, p *pipeline, sku, customer string) int {
	t.Helper()
	var n int
	err := p.DB.DB().GetContext(context.Background(), &n,
		"SELECT COALESCE(SUM(i.qty), 0) FROM invoices i JOIN orders o USING (order_id) WHERE o.sku = ? AND o.customer_id = ?", sku, customer)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurchaseLimitOneCustomerManyKeys: one customer posts 30 orders with
// distinct keys at once on a SKU limited to 3 per customer. Exactly 3 are
// accepted and invoiced, the others are answered 409 purchase_limit (never
// sold_out: units are left) and never invoiced; retries of the accepted
// keys count once; another customer still buys; raising the limit mid-sale
// lets the customer buy more, up to the new limit.
func TestPurchaseLimitOneCustomerManyKeys(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("limit-")
	// The customer's rate budget (40 requests, refilled in 2 s) admits
	// every wave below; a wave waits for it to refill.
	const limit, tries = 3, 30
	p.loadLimited(t, sku, 100, limit)
	bot, ann := testenv.Unique("bot-"), testenv.Unique("ann-")
	ks := make([]string, tries)
	for i := range ks {
		ks[i] = fmt.Sprint("k", i)
	}
	answers := postAll(t, p, sku, bot, ks)
	var accepted []string
	var acceptedKeys []string
	for i, a := range answers {
		switch {
		case a.Status == http.StatusAccepted:
			accepted, acceptedKeys = append(accepted, a.OrderID), append(acceptedKeys, ks[i])
		case a.Status == http.StatusConflict && a.Error.Code == "purchase_limit":
		default:
			t.Fatalf("order %d: %+v, want 202 or 409 purchase_limit", i, a)
		}
	}
	if len(accepted) != limit {
		t.Fatalf("%d accepted, want %d", len(accepted), limit)
	}
	// Retries of every key, accepted or refused, give the first answers.
	time.Sleep(2 * time.Second)
	for i, a := range postAll(t, p, sku, bot, ks) {
		if a.Status != answers[i].Status || a.OrderID != answers[i].OrderID {
			t.Fatalf("retry of key %s: %+v, first answer %+v", ks[i], a, answers[i])
		}
	}
	if a := post(t, newClient(t), p.URL, "other-1", orderBody(sku, limit, ann)); a.Status != http.StatusAccepted {
		t.Fatalf("another customer: %+v", a)
	}
	if st := waitLimitSettled(t, p, accepted); st["invoiced"] != limit {
		t.Fatalf("statuses %v, want %d invoiced", st, limit)
	}
	if n := invoicedUnits(t, p, sku, bot); n != limit {
		t.Fatalf("MySQL invoiced %d units to the customer, want %d", n, limit)
	}
	// Raised mid-sale: new orders get the room, up to the new limit.
	if a := p.putBody(t, sku, `{"stock":100,"max_per_customer":5}`); a.Status != http.StatusOK {
		t.Fatalf("raise the limit: %+v", a)
	}
	time.Sleep(2 * time.Second)
	more := postAll(t, p, sku, bot, []string{"m1", "m2", "m3", "m4"})
	var got []string
	for _, a := range more {
		if a.Status == http.StatusAccepted {
			got = append(got, a.OrderID)
		} else if a.Error.Code != "purchase_limit" {
			t.Fatalf("after raising the limit: %+v", a)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d accepted after raising the limit to 5, want 2", len(got))
	}
	waitLimitSettled(t, p, got)
	if n := invoicedUnits(t, p, sku, bot); n != 5 {
		t.Fatalf("MySQL invoiced %d units to the customer, want 5", n)
	}
}

// TestPurchaseLimitBadLoadChangesNothing: a limit below 0 or above the
// largest stock is refused with 400, and the SKU keeps its stock and limit.
func TestPurchaseLimitBadLoadChangesNothing(t *testing.T) {
	p := startGatewayOnly(t)
	sku := testenv.Unique("limitbad-")
	p.loadLimited(t, sku, 10, 2)
	for _, bad := range []string{`-1`, `1000000001`, `"2"`, `1.5`} {
		req, _ := http.NewRequest(http.MethodPut, p.Admin+"/v1/admin/stock/"+sku, strings.NewReader(`{"stock":20,"max_per_customer":`+bad+`}`))
		req.Header.Set("Authorization", "Bearer "+p.Token)
		a := do(t, apitest.Client(t), apitest.Invalid(req))
		if a.Status != http.StatusBadRequest || a.Error.Code != "invalid_request" {
			t.Fatalf("max_per_customer %s: %+v, want 400 invalid_request", bad, a)
		}
	}
	prod, err := p.DB.Product(context.Background(), sku)
	if err != nil || prod.Stock != 10 || prod.MaxPerCustomer != 2 {
		t.Fatalf("MySQL after refused loads: %+v %v", prod, err)
	}
	v, err := p.Stock.View(context.Background(), sku)
	if err != nil || v.Stock != 10 || v.MaxPerCustomer != 2 {
		t.Fatalf("Redis after refused loads: %+v %v", v, err)
	}
	// A load without the field keeps the limit.
	if a := p.putBody(t, sku, `{"stock":12}`); a.Status != http.StatusOK {
		t.Fatalf("restock: %+v", a)
	}
	if v, err := p.Stock.View(context.Background(), sku); err != nil || v.MaxPerCustomer != 2 {
		t.Fatalf("a restock without max_per_customer: limit %d %v, want 2 kept", v.MaxPerCustomer, err)
	}
}

// TestPurchaseLimitMySQLGuard: Redis loses the customer's count (a lossy
// failover; here the key is deleted) and accepts orders past the limit;
// the worker refuses those in MySQL with purchase_limit_after_acceptance,
// releases their reservations, and invoices no more than the limit.
func TestPurchaseLimitMySQLGuard(t *testing.T) {
	p := startGatewayOnly(t)
	sku := testenv.Unique("limitdb-")
	const limit = 2
	p.loadLimited(t, sku, 20, limit)
	bot := testenv.Unique("bot-")
	rdb := testenv.Redis(t)
	var ids []string
	for i := range 5 {
		a := post(t, newClient(t), p.URL, fmt.Sprint("g", i), orderBody(sku, 1, bot))
		if a.Status != http.StatusAccepted {
			t.Fatalf("order %d: %+v", i, a)
		}
		ids = append(ids, a.OrderID)
		if err := rdb.Del(context.Background(), keys.CustomerUnits(sku, bot)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, p.Cfg)
	st := waitLimitSettled(t, p, ids)
	if st["invoiced"] != limit || st["rejected"] != 5-limit {
		t.Fatalf("statuses %v, want %d invoiced and %d rejected", st, limit, 5-limit)
	}
	var reasons []string
	err := p.DB.DB().SelectContext(context.Background(), &reasons, "SELECT reason FROM orders WHERE sku = ? AND status = 'rejected'", sku)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reasons {
		if r != order.ReasonPurchaseLimit {
			t.Fatalf("rejected with reason %q, want %q", r, order.ReasonPurchaseLimit)
		}
	}
	testkit.WaitFor(t, "Redis settled", 10*time.Second, func() (bool, error) {
		v, err := p.Stock.View(context.Background(), sku)
		return err == nil && v.Reserved == 0 && v.Sold == limit && v.Consistent(), fmt.Errorf("%+v %v", v, err)
	})
	if prod, err := p.DB.Product(context.Background(), sku); err != nil || prod.Sold != limit {
		t.Fatalf("MySQL sold %d %v, want %d", prod.Sold, err, limit)
	}
}

// TestPurchaseLimitRetryOverBudget: a customer's retries of keys refused
// for the purchase limit, sent past its rate budget, get 409
// purchase_limit again, not 503 outcome_unknown: the refusal is final.
func TestPurchaseLimitRetryOverBudget(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("limit-")
	const limit, tries = 1, 30
	p.loadLimited(t, sku, 100, limit)
	bot := testenv.Unique("bot-")
	ks := make([]string, tries)
	for i := range ks {
		ks[i] = fmt.Sprint("k", i)
	}
	var refused []string
	for i, a := range postAll(t, p, sku, bot, ks) {
		if a.Status == http.StatusConflict && a.Error.Code == "purchase_limit" {
			refused = append(refused, ks[i])
		}
	}
	if len(refused) != tries-limit {
		t.Fatalf("%d refused for the limit, want %d", len(refused), tries-limit)
	}
	// The budget (40 requests, refilled in 2 s) is mostly spent: three
	// rounds of the refused keys at once go past it.
	for range 3 {
		for i, a := range postAll(t, p, sku, bot, refused) {
			if a.Status != http.StatusConflict || a.Error.Code != "purchase_limit" {
				t.Fatalf("retry of refused key %s: %d %s, want 409 purchase_limit", refused[i], a.Status, a.Error.Code)
			}
		}
	}
	if n := invoicedUnits(t, p, sku, bot); n > limit {
		t.Fatalf("MySQL invoiced %d units to the customer, past the limit %d", n, limit)
	}
}

// TestPurchaseLimitLoweredAfterAcceptance: a customer's three orders are
// accepted under a limit of 5 while no worker runs; the operator lowers
// the limit to 2 (200), which holds the customer's next order (409
// purchase_limit); once a worker runs, all three accepted orders are
// invoiced: the limit lowered after they were accepted turns none of them
// into a rejection.
func TestPurchaseLimitLoweredAfterAcceptance(t *testing.T) {
	p := startGatewayOnly(t)
	sku := testenv.Unique("limitlow-")
	p.loadLimited(t, sku, 10, 5)
	ann := testenv.Unique("ann-")
	var ids []string
	for i := range 3 {
		a := post(t, newClient(t), p.URL, fmt.Sprint("k", i), orderBody(sku, 1, ann))
		if a.Status != http.StatusAccepted {
			t.Fatalf("order %d: %+v", i, a)
		}
		ids = append(ids, a.OrderID)
	}
	if a := p.putBody(t, sku, `{"stock":10,"max_per_customer":2}`); a.Status != http.StatusOK {
		t.Fatalf("lower the limit: %+v", a)
	}
	if a := post(t, newClient(t), p.URL, "k3", orderBody(sku, 1, ann)); a.Status != http.StatusConflict || a.Error.Code != "purchase_limit" {
		t.Fatalf("an order after the limit was lowered: %+v, want 409 purchase_limit", a)
	}
	startWorker(t, p.Cfg)
	if st := waitLimitSettled(t, p, ids); st["invoiced"] != 3 {
		t.Fatalf("statuses %v, want the 3 accepted orders invoiced", st)
	}
	if n := invoicedUnits(t, p, sku, ann); n != 3 {
		t.Fatalf("MySQL invoiced %d units to the customer, want 3", n)
	}
}
