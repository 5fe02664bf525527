package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
)

// TestStatusPendingWhileItsRequestMayUndo: while the request that reserved
// an order still waits for RabbitMQ's confirm, it may yet take the
// reservation back and answer 503 unavailable. GET /v1/orders/{id} must
// not call that order accepted: it says pending. Once the request can no
// longer undo it, the order reads accepted.
func TestStatusPendingWhileItsRequestMayUndo(t *testing.T) {
	p, proxy := gatewayWithStallableBroker(t)
	sku := testenv.Unique("pending-")
	p.loadStock(t, sku, 5)
	if warm := post(t, newClient(t), p.URL, "pending-0", orderBody(sku, 1, sku+"-w")); warm.Status != http.StatusAccepted {
		t.Fatalf("first order: %d %+v", warm.Status, warm.Error)
	}
	p.stopW() // the order stays reserved, as when workers lag behind
	proxy.Stall()
	answered := make(chan answer, 1)
	go func() { answered <- post(t, newClient(t), p.URL, "pending-1", orderBody(sku, 2, sku+"-a")) }()
	var id string
	testkit.WaitFor(t, "the stalled order's reservation", 10*time.Second, func() (bool, error) {
		v, err := p.Stock.View(context.Background(), sku)
		for rid, h := range v.Reservations {
			if h.CustomerID == sku+"-a" {
				id = rid
			}
		}
		return id != "", fmt.Errorf("%+v (%v)", v, err)
	})
	status := orderStatus(t, p.URL, id)
	select {
	case a := <-answered:
		t.Fatalf("the request answered %d %+v before the status was read: the test cannot tell", a.Status, a.Error)
	default:
	}
	if status != "pending" {
		t.Fatalf("status while its request may still undo it: %q, want pending", status)
	}
	proxy.Resume()
	a := <-answered
	// The broker held the message: accepted when the confirm came in
	// time after all, an unknown outcome when it did not.
	if a.Status != http.StatusAccepted && a.Error.Code != "outcome_unknown" {
		t.Fatalf("stalled confirm: %d %+v, want 202 or 503 outcome_unknown", a.Status, a.Error)
	}
	testkit.WaitFor(t, "the order to read accepted", 30*time.Second, func() (bool, error) {
		s := orderStatus(t, p.URL, id)
		return s == "accepted", fmt.Errorf("status %q", s)
	})
}

// orderStatus reads GET /v1/orders/{id}'s status ("" for a 404).
func orderStatus(t *testing.T, url, id string) string {
	t.Helper()
	resp, err := apitest.Client(t).Get(url + "/v1/orders/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Status string `json:"status"`
	}
	if resp.StatusCode == http.StatusOK {
		_ = jsonDecode(resp.Body, &v)
	}
	return v.Status
}
