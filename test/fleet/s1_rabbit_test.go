//go:build fleet

package fleet

import (
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestQuorumLeaderKilled: the RabbitMQ node leading orders.created is
// killed (SIGKILL) three seconds into the sale and started again ten
// seconds later. The queue elects a leader among the two others, the
// gateways and workers that used the dead node redial the next one, and
// every publish whose confirm died with the node was answered
// outcome_unknown, retried, and settled.
func TestQuorumLeaderKilled(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	leader := f.sh(t, "rabbit-leader", "orders.created")
	t.Logf("orders.created is led by the node on %s", leader)
	sku := testenv.Unique("fleet-rabbit")
	var killedAt, back time.Time
	s := f.runSale(t, sku, 4000, func() {
		after(time.Now(), 3*time.Second)
		f.sh(t, "kill-rabbit", leader)
		killedAt = time.Now()
		t.Logf("killed the node on %s; new leader: %s", leader, f.sh(t, "rabbit-leader", "orders.created"))
		after(killedAt, 10*time.Second)
		f.sh(t, "start-rabbit", leader)
		back = time.Now()
		t.Logf("node on %s back in the cluster %.1fs after the kill", leader, back.Sub(killedAt).Seconds())
	})
	f.check(t, s, 90*time.Second)
	f.healthy(t)
}
