package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// TestSoldOutAnswersWriteNothing: once a SKU's last unit is gone, new
// orders are answered sold out from a read of the SKU made for them: no
// idempotency record, no order state, no rate budget, so no key at all
// for any of them. A twin of the accepted order still gets its 202; a key
// answered sold out is free, so after a restock its retry takes the unit.
func TestSoldOutAnswersWriteNothing(t *testing.T) {
	p := startPipeline(t)
	rdb := testenv.Redis(t)
	ctx := context.Background()
	sku := testenv.Unique("sighted-")
	p.loadStock(t, sku, 1)
	c := newClient(t)
	buyer := testenv.Unique("c-")
	first := post(t, c, p.URL, "k", orderBody(sku, 1, buyer))
	if first.Status != http.StatusAccepted {
		t.Fatalf("first buyer: %+v, want 202", first)
	}
	var late []string
	for range 200 {
		customer := testenv.Unique("c-")
		late = append(late, customer)
		a := post(t, c, p.URL, "k", orderBody(sku, 1, customer))
		if a.Status != http.StatusConflict || a.Error.Code != "sold_out" {
			t.Fatalf("buyer after the last unit: %+v, want 409 sold_out", a)
		}
	}
	// Every key any of them could have written: records in the windows
	// around now, order states on the SKU's slot, the customers' budgets.
	var written []string
	for _, customer := range late {
		w := order.KeyWindow(customer, "k", time.Now(), 24*time.Hour)
		ks := []string{keys.CustomerRate(customer)}
		for d := int64(-2); d <= 1; d++ {
			id := order.IDFor(customer, "k", w+d)
			ks = append(ks, keys.Idem(id), keys.OrderState(sku, id), keys.Undone(sku, id))
		}
		for _, k := range ks {
			if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
				written = append(written, fmt.Sprintf("%s (exists=%d err=%v)", k, n, err))
			}
		}
	}
	if len(written) > 0 {
		t.Fatalf("200 sold-out answers left %d keys, want none: %v", len(written), written[:min(len(written), 5)])
	}
	twin := post(t, c, p.URL, "k", orderBody(sku, 1, buyer))
	if twin.Status != http.StatusAccepted || twin.OrderID != first.OrderID {
		t.Fatalf("retry of the accepted order while sold out: %+v, want 202 %s", twin, first.OrderID)
	}
	p.restock(t, sku, 2) // one more unit
	again := post(t, c, p.URL, "k", orderBody(sku, 1, late[0]))
	if again.Status != http.StatusAccepted {
		t.Fatalf("retry of a key answered sold out, after a restock: %+v, want 202 (the key is free)", again)
	}
	if other := post(t, c, p.URL, "k", orderBody(sku, 2, late[0])); other.Status != http.StatusUnprocessableEntity {
		t.Fatalf("same key, other body, once it names an order: %+v, want 422", other)
	}
}
