//go:build fleet

package fleet

import (
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestWorkerHostLost: the first worker's host is lost while it holds
// orders in hand (prefetched, in a batch): its link goes down, then its
// process is killed, so neither an ack nor a TCP reset ever reaches the
// broker. RabbitMQ gives its unacked deliveries back once the connection's
// heartbeat times out; the other worker invoices them, exactly once,
// including those whose MySQL transaction had committed before the host
// went. The host comes back only after the checks.
func TestWorkerHostLost(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	sku := testenv.Unique("fleet-worker")
	var lost time.Time
	s := f.runSale(t, sku, 3000, func() {
		after(time.Now(), 4*time.Second)
		f.sh(t, "lose", "wk1")
		lost = time.Now()
		// The broker does not know yet: what it counts is what wk1 held.
		t.Logf("worker host wk1 lost mid-sale holding %s unacked deliveries", f.sh(t, "rabbit-unacked", "wk1"))
	})
	f.check(t, s, 120*time.Second)
	t.Logf("every order final %.1fs after the worker host was lost", time.Since(lost).Seconds())
	if out := f.sh(t, "revive", "wk1"); out != "" {
		t.Log(out)
	}
	f.healthy(t)
}
