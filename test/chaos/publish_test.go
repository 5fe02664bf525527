//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
	"surge/pkg/idem"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
)

// TestReservationWithoutPublishIsReturned: a gateway that died between
// its reservation and its publish leaves units reserved for an order no
// queue holds, and no release will ever come. Once the grace period has
// passed the reconciler returns them; a reservation still within it is
// kept. The checkout's retry with the same key is then accepted and
// invoiced as usual.
func TestReservationWithoutPublishIsReturned(t *testing.T) {
	ctx := context.Background()
	p := startPipeline(t)
	sku := testenv.Unique("chaos-nopub-")
	p.loadStock(sku, 5)

	// The dead gateway's steps: claim the idempotency record and reserve
	// (a minute ago), then nothing.
	customer, key := "c-"+sku, "k1"
	dead := order.Order{ID: order.IDFor(customer, key), SKU: sku, Qty: 2, CustomerID: customer}
	if _, err := idem.New(p.redis, 0).Claim(ctx, dead, false); err != nil {
		t.Fatal(err)
	}
	earlier := stock.New(p.redis, stock.Options{Now: func() time.Time { return time.Now().Add(-time.Minute) }})
	if _, err := earlier.Reserve(ctx, dead); err != nil {
		t.Fatal(err)
	}
	// Another reservation, made just now: its order may still be on its
	// way to the queue.
	fresh := order.Order{ID: order.IDFor(customer, "k2"), SKU: sku, Qty: 1, CustomerID: customer}
	if _, err := p.stock.Reserve(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	rep := p.reconciler().Run(ctx, false, sku)
	if rep.ExitCode != reconcile.ExitRepaired || len(rep.SKUs[0].Repairs) != 1 {
		t.Fatalf("reconcile: %+v, want one repair", rep)
	}
	if diff := cmp.Diff([]string{dead.ID}, rep.SKUs[0].Repairs[0].Released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	v, err := p.stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := v.Reservations[fresh.ID]; v.Avail != 4 || v.Reserved != 1 || !kept || !v.Consistent() {
		t.Fatalf("after reconcile: %+v, want the dead order's 2 units back and the fresh reservation kept", v)
	}

	// The checkout retries the dead order with the same key.
	id := p.post(t, customer, key, `{"sku":"`+sku+`","qty":2,"customer_id":"`+customer+`"}`)
	if id != dead.ID {
		t.Fatalf("retry accepted as %s, want %s", id, dead.ID)
	}
	waitFor(t, "the retried order to be invoiced", 30*time.Second, func() (bool, error) {
		c, err := p.finalOrders([]string{id})
		return err == nil && c["invoiced"] == 1, err
	})
	v, err = p.stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Consistent() || v.Sold != 2 || v.Sold != p.mysqlSold(sku) || v.Avail != 2 {
		t.Errorf("after the retry: %+v, mysql sold %d; want sold 2 in both and avail 2", v, p.mysqlSold(sku))
	}
}

// post places an order and returns its id, failing unless it got 202.
func (p *pipeline) post(t *testing.T, customer, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("order by %s: %d %s", customer, resp.StatusCode, b)
	}
	var acc struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(b, &acc); err != nil {
		t.Fatal(err)
	}
	return acc.OrderID
}
