package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/keys"
	"surge/pkg/order"
)

// TestSoldOutHint: once a SKU's last unit is gone, the gateway answers new
// orders sold out without the reserve script (nothing is written on the
// SKU's slot for them), yet each answer is recorded under its key: a
// retry after a restock still gets sold out, a twin of the accepted order
// still gets its 202, and a new buyer after the restock gets a unit.
func TestSoldOutHint(t *testing.T) {
	p := startPipeline(t)
	rdb := testenv.Redis(t)
	ctx := context.Background()
	sku := testenv.Unique("hint-")
	p.loadStock(t, sku, 1)
	c := newClient(t)
	buyer, late := testenv.Unique("c-"), testenv.Unique("c-")

	first := post(t, c, p.URL, "k", orderBody(sku, 1, buyer))
	if first.Status != http.StatusAccepted {
		t.Fatalf("first buyer: %+v, want 202", first)
	}
	soldOut := post(t, c, p.URL, "k", orderBody(sku, 1, late))
	if soldOut.Status != http.StatusConflict || soldOut.Error.Code != "sold_out" {
		t.Fatalf("buyer after the last unit: %+v, want 409 sold_out", soldOut)
	}
	w := order.KeyWindow(late, "k", time.Now(), 24*time.Hour)
	for d := int64(-1); d <= 1; d++ {
		lateID := order.IDFor(late, "k", w+d)
		if n, err := rdb.Exists(ctx, keys.OrderState(sku, lateID)).Result(); err != nil || n != 0 {
			t.Fatalf("order state on the SKU's slot for a hinted answer: exists=%d err=%v, want none", n, err)
		}
	}
	if n, err := rdb.Exists(ctx, recordKeys(late, "k")...).Result(); err != nil || n != 1 {
		t.Fatalf("idempotency record of the hinted answer: exists=%d err=%v, want 1", n, err)
	}
	twin := post(t, c, p.URL, "k", orderBody(sku, 1, buyer))
	if twin.Status != http.StatusAccepted || twin.OrderID != first.OrderID {
		t.Fatalf("retry of the accepted order while sold out: %+v, want 202 %s", twin, first.OrderID)
	}

	p.restock(t, sku, 2) // one more unit; the load clears the hint
	if again := post(t, c, p.URL, "k", orderBody(sku, 1, late)); again.Status != http.StatusConflict {
		t.Fatalf("retry of the sold-out answer after a restock: %+v, want the first answer, 409", again)
	}
	if other := post(t, c, p.URL, "k", orderBody(sku, 2, late)); other.Status != http.StatusUnprocessableEntity {
		t.Fatalf("same key, other body: %+v, want 422", other)
	}
	if fresh := post(t, c, p.URL, "k", orderBody(sku, 1, testenv.Unique("c-"))); fresh.Status != http.StatusAccepted {
		t.Fatalf("new buyer after the restock: %+v, want 202", fresh)
	}
}
