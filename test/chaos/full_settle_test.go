//go:build chaos

package chaos

import (
	"context"
	"net/http"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/internal/testkit"
)

// TestFullClusterStillInvoices: orders accepted before every master
// reached maxmemory are invoiced while memory is still full. New orders
// are refused (the reserve script takes memory), but the scripts that
// settle an order (the order's lock, its lease, the commit) write a few
// bytes and free more: Redis must run them, or invoicing stops until
// memory falls.
func TestFullClusterStillInvoices(t *testing.T) {
	ctx := context.Background()
	p := startGatewayOnly(t)
	sku := testenv.Unique("chaos-full-settle-")
	p.loadStock(sku, 10)
	var ids []string
	for _, c := range []string{sku + "-1", sku + "-2"} {
		a := p.order(t, sku, c, "k1")
		if a.Status != http.StatusAccepted {
			t.Fatalf("order before the cluster fills: %+v", a)
		}
		ids = append(ids, a.OrderID)
	}
	fill(t, ctx, p, "1")
	if a := p.order(t, sku, sku+"-late", "k1"); a.Status != http.StatusServiceUnavailable || a.Error.Code != "unavailable" {
		t.Fatalf("new order on a full cluster: %+v, want 503 unavailable", a)
	}
	p.startWorker()
	p.waitSold(sku, 2, 30*time.Second)
	for _, id := range ids {
		if st := p.status(t, id); st != "invoiced" {
			t.Fatalf("status of %s on a full cluster: %q, want invoiced", id, st)
		}
	}
	testkit.WaitFor(t, "the reservations committed in Redis", 10*time.Second, func() (bool, error) {
		v, err := p.stock.View(ctx, sku)
		return err == nil && v.Sold == 2 && v.Reserved == 0 && v.Consistent(), err
	})
}
