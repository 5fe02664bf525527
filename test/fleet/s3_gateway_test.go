//go:build fleet

package fleet

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"surge/internal/testenv"
)

// TestGatewayHostLost: the first gateway's host is lost three seconds
// into the sale (its link goes down, then its process is killed), and
// comes back ten seconds later. HAProxy's /readyz checks take it out of
// the rotation; requests it held in flight time out at the buyers, who
// retry the same key through the other gateway: the retry names the same
// order, so no 202 is lost and none is doubled. The test sees the loss
// take effect: a request to the host's own address fails, and HAProxy
// marks it DOWN on a layer-4 check (no connection: an unready gateway, as
// a busy one can be for a moment, fails its check on layer 7 instead).
func TestGatewayHostLost(t *testing.T) {
	f := getFleet(t)
	f.healthy(t)
	gw1 := "http://" + f.sh(t, "addr", "gw1") + ":8080"
	sku := testenv.Unique("fleet-gateway")
	unreachable, down := time.Duration(-1), time.Duration(-1)
	var lbStatus string
	s := f.runSale(t, sku, 3000, func() {
		after(time.Now(), 3*time.Second)
		f.sh(t, "lose", "gw1")
		lost := time.Now()
		unreachable = within(5*time.Second, func() bool { return !answers(gw1 + "/healthz") })
		down = within(10*time.Second, func() bool {
			out, err := f.try("lb-status", "gw1")
			lbStatus = out
			state, check, _ := strings.Cut(out, " ")
			return err == nil && state == "DOWN" && strings.HasPrefix(check, "L4")
		})
		t.Logf("gateway host gw1 lost: unreachable %s, DOWN in HAProxy %s", seen(unreachable), seen(down))
		after(lost, 10*time.Second)
		if out := f.sh(t, "revive", "gw1"); out != "" {
			t.Log(out)
		}
		t.Logf("gateway host gw1 back and ready %.1fs after it was lost", time.Since(lost).Seconds())
	})
	if unreachable < 0 {
		t.Errorf("after the loss, %s still answered: the host gw1 was not lost", gw1)
	}
	if down < 0 {
		t.Errorf("after the loss, HAProxy never marked gw1 DOWN for want of a connection (last seen: %q)", lbStatus)
	}
	f.check(t, s, 90*time.Second)
	f.healthy(t)
}

// answers tells whether url answers an HTTP request at all, whatever
// the status.
func answers(url string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}
