//go:build fleet

package fleet

import (
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestGatewayHostLost: the first gateway's host is lost three seconds
// into the sale (its link goes down, then its process is killed), and
// comes back ten seconds later. HAProxy's /readyz checks take it out of
// the rotation; requests it held in flight time out at the buyers, who
// retry the same key through the other gateway: the retry names the same
// order, so no 202 is lost and none is doubled.
func TestGatewayHostLost(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	sku := testenv.Unique("fleet-gateway")
	s := f.runSale(t, sku, 3000, func() {
		after(time.Now(), 3*time.Second)
		f.sh(t, "lose", "gw1")
		lost := time.Now()
		t.Logf("gateway host gw1 lost")
		after(lost, 10*time.Second)
		if out := f.sh(t, "revive", "gw1"); out != "" {
			t.Log(out)
		}
		t.Logf("gateway host gw1 back and ready %.1fs after it was lost", time.Since(lost).Seconds())
	})
	f.check(t, s, 90*time.Second)
	f.healthy(t)
}
