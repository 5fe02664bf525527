//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/order"
)

// TestPurchaseLimitAcrossLossyFailover: a customer buys up to the
// purchase limit while the SKU's master has no replica link, and the
// master dies: the promoted replica never saw the customer's count. Redis
// then accepts orders past the limit, and MySQL refuses every one of them
// (purchase_limit_after_acceptance): the customer is never invoiced past
// the limit. The reconciler then restores the count, and Redis refuses the
// customer again with 409 purchase_limit.
func TestPurchaseLimitAcrossLossyFailover(t *testing.T) {
	const limit = 3
	ctx := context.Background()
	p := startPipeline(t)
	sku := testenv.Unique("chaos-limit-")
	p.loadLimited(sku, 100, limit)
	slot := p.slot(sku)
	master, replica := priv.shard(t, slot)
	t.Cleanup(func() { priv.heal(t) })
	bot := testenv.Unique("bot-")

	priv.signal(t, replica, syscall.SIGSTOP)
	if err := priv.node(t, master).ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		priv.signal(t, replica, syscall.SIGCONT)
		t.Fatalf("cut the replica link: %v", err)
	}
	for i := range limit {
		if a := p.order(t, sku, bot, fmt.Sprint("before-", i)); a.Status != http.StatusAccepted {
			priv.signal(t, replica, syscall.SIGCONT)
			t.Fatalf("order %d before the failover: %d %s", i, a.Status, a.raw)
		}
	}
	if a := p.order(t, sku, bot, "before-over"); a.Status != http.StatusConflict || a.Error.Code != "purchase_limit" {
		priv.signal(t, replica, syscall.SIGCONT)
		t.Fatalf("order past the limit before the failover: %d %s", a.Status, a.raw)
	}
	testkit.WaitFor(t, "the customer's orders invoiced", 30*time.Second, func() (bool, error) {
		n := p.invoicedUnits(sku, bot)
		return n == limit, fmt.Errorf("%d invoiced", n)
	})
	priv.signal(t, master, syscall.SIGKILL)
	priv.signal(t, replica, syscall.SIGCONT)
	priv.waitPromoted(t, slot, master, replica)

	// The promoted replica lost the count: Redis accepts again.
	var accepted []string
	for i := range limit + 2 {
		a := p.orderSettled(t, sku, bot, fmt.Sprint("after-", i))
		switch {
		case a.Status == http.StatusAccepted:
			accepted = append(accepted, a.OrderID)
		case a.Status == http.StatusConflict && a.Error.Code == "purchase_limit":
		default:
			t.Fatalf("order %d after the failover: %d %s", i, a.Status, a.raw)
		}
	}
	if len(accepted) == 0 {
		t.Fatal("no order accepted after the failover: the count was not lost, the scenario did not happen")
	}
	p.quiesce()
	testkit.WaitFor(t, "the orders accepted after the failover settled", 30*time.Second, func() (bool, error) {
		st, err := testkit.OrderStatuses(ctx, p.db, accepted)
		return err == nil && st["rejected"] == len(accepted), fmt.Errorf("%v (%v)", st, err)
	})
	if n := p.invoicedUnits(sku, bot); n != limit {
		t.Fatalf("MySQL invoiced %d units to the customer, limit %d", n, limit)
	}
	var other int
	err := p.db.DB().GetContext(ctx, &other, "SELECT COUNT(*) FROM orders WHERE sku = ? AND status = 'rejected' AND reason <> ?",
		sku, order.ReasonPurchaseLimit)
	if err != nil || other != 0 {
		t.Fatalf("%d orders rejected for another reason (%v)", other, err)
	}

	rep := p.reconciler().Run(ctx, false, sku)
	t.Logf("accepted after the failover and rejected by MySQL: %d; reconcile: %s", len(accepted), describe(rep))
	if a := p.orderSettled(t, sku, bot, "after-reconcile"); a.Status != http.StatusConflict || a.Error.Code != "purchase_limit" {
		t.Fatalf("order after the reconcile: %d %s, want 409 purchase_limit", a.Status, a.raw)
	}
}

// orderSettled is order retried with the same key after a 503, as a
// checkout does while the cluster settles after a failover.
func (p *pipeline) orderSettled(t *testing.T, sku, customer, key string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := p.order(t, sku, customer, key)
		if a.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return a
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// loadLimited creates the product with n units and a purchase limit.
func (p *pipeline) loadLimited(sku string, n, limit int) {
	p.t.Helper()
	body := fmt.Sprintf(`{"stock":%d,"name":"Chaos item","price_cents":500,"max_per_customer":%d}`, n, limit)
	req, _ := http.NewRequest(http.MethodPut, p.admin+"/v1/admin/stock/"+sku, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := apiClient(p.t).Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("load %s: %d", sku, resp.StatusCode)
	}
}

// invoicedUnits sums what MySQL invoiced to customer of sku.
func (p *pipeline) invoicedUnits(sku, customer string) int {
	p.t.Helper()
	var n int
	err := p.db.DB().GetContext(context.Background(), &n,
		"SELECT COALESCE(SUM(qty), 0) FROM orders WHERE sku = ? AND customer_id = ? AND status = 'invoiced'", sku, customer)
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}
