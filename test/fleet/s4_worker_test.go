//go:build fleet

package fleet

import (
	"strconv"
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
// went. The host comes back only after the checks. The test sees the loss
// take effect: the broker held consumers for the host's worker before it,
// and drops every one of them after it.
func TestWorkerHostLost(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	sku := testenv.Unique("fleet-worker")
	var lost time.Time
	before, left := -1, -1
	gone := time.Duration(-1)
	s := f.runSale(t, sku, 3000, func() {
		after(time.Now(), 4*time.Second)
		before = consumersOf(f, "wk1")
		f.sh(t, "lose", "wk1")
		lost = time.Now()
		// The broker does not know yet: what it counts is what wk1 held.
		t.Logf("worker host wk1 lost mid-sale holding %s unacked deliveries", f.sh(t, "rabbit-unacked", "wk1"))
		// It drops the consumers when the connection's heartbeat times out.
		gone = within(90*time.Second, func() bool { left = consumersOf(f, "wk1"); return left == 0 })
		t.Logf("the broker held %d consumers for wk1 before the loss, and none %s", before, seen(gone))
	})
	if before <= 0 {
		t.Errorf("the broker held %d consumers for wk1 before the loss: the scenario lost no consumer", before)
	}
	if gone < 0 {
		t.Errorf("after the loss, the broker still held %d consumers for wk1: its worker was not lost", left)
	}
	f.check(t, s, 120*time.Second)
	t.Logf("every order final %.1fs after the worker host was lost", time.Since(lost).Seconds())
	if out := f.sh(t, "revive", "wk1"); out != "" {
		t.Log(out)
	}
	f.healthy(t)
}

// consumersOf is the number of consumers the broker holds for host's
// channels, or -1 when no node answered.
func consumersOf(f *fleet, host string) int {
	out, err := f.try("rabbit-consumers", host)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		return -1
	}
	return n
}
