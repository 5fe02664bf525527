//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/internal/testkit"
)

// TestRetryOfAnOrderAFailoverLost: an order is answered 202 by a master
// whose replica link is cut, and the master dies before its writes reach
// the replica; the promoted replica never saw the order, and the last
// units are sold on it to other buyers. The order's message is still in
// the queue (no worker runs yet), so the order will be invoiced or
// compensated: a retry of its key must not be answered "not taken"
// (409 sold_out) from the promoted replica's memory. It is answered 503
// outcome_unknown while the failover is recent, and gets its own 202
// once the worker has settled it.
func TestRetryOfAnOrderAFailoverLost(t *testing.T) {
	const stock = 2
	ctx := context.Background()
	p := startGatewayOnly(t)
	sku := testenv.Unique("chaos-lost-retry-")
	p.loadStock(sku, stock)
	slot := p.slot(sku)
	master, replica := priv.shard(t, slot)
	t.Cleanup(func() { priv.heal(t) })
	buyer := testenv.Unique("buyer-")

	priv.signal(t, replica, syscall.SIGSTOP)
	if err := priv.node(t, master).ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		priv.signal(t, replica, syscall.SIGCONT)
		t.Fatalf("cut the replica link: %v", err)
	}
	first := p.order(t, sku, buyer, "lost")
	if first.Status != http.StatusAccepted {
		priv.signal(t, replica, syscall.SIGCONT)
		t.Fatalf("order before the failover: %d %s", first.Status, first.raw)
	}
	priv.signal(t, master, syscall.SIGKILL)
	priv.signal(t, replica, syscall.SIGCONT)
	priv.waitPromoted(t, slot, master, replica)

	// The promoted replica has every unit: others buy them all.
	for i := range stock {
		if a := p.orderSettled(t, sku, testenv.Unique("other-"), fmt.Sprint("other-", i)); a.Status != http.StatusAccepted {
			t.Fatalf("order %d after the failover: %d %s (the order was not lost, or the stock is wrong)", i, a.Status, a.raw)
		}
	}
	retry := p.order(t, sku, buyer, "lost")
	switch {
	case retry.Status == http.StatusConflict:
		t.Fatalf("retry of an order answered 202, whose message is still queued: %d %s, a \"not taken\" answer",
			retry.Status, retry.raw)
	case retry.Status == http.StatusServiceUnavailable && retry.Error.Code != "outcome_unknown":
		t.Fatalf("retry of an order answered 202: %d %s, want 503 outcome_unknown", retry.Status, retry.raw)
	case retry.Status == http.StatusAccepted && retry.OrderID != first.OrderID:
		t.Fatalf("retry answered 202 for order %s, the key's order is %s", retry.OrderID, first.OrderID)
	}
	t.Logf("retry while the message is queued: %d %s", retry.Status, retry.raw)

	p.startWorker()
	testkit.WaitFor(t, "the order settled", 60*time.Second, func() (bool, error) {
		st := p.status(t, first.OrderID)
		return st == "invoiced" || st == "rejected", fmt.Errorf("status %q", st)
	})
	if a := p.order(t, sku, buyer, "lost"); a.Status != http.StatusAccepted || a.OrderID != first.OrderID {
		t.Fatalf("retry once the order settled: %d %s, want 202 for %s", a.Status, a.raw, first.OrderID)
	}
}
