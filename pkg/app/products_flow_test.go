package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"surge/internal/apitest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/keys"
)

type productAnswer struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Available  int    `json:"available"`
}

func getProduct(t *testing.T, url, sku string) (productAnswer, int) {
	t.Helper()
	resp, err := apitest.Client(t).Get(url + "/v1/products/" + sku)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v productAnswer
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v, resp.StatusCode
}

// The cached product view follows the sale: the worker rewrites its
// available after each commit, well within the view's 30s TTL, and a
// stock load through the admin API replaces it at once.
func TestProductViewFollowsSales(t *testing.T) {
	p := startPipeline(t)
	sku := testenv.Unique("view-")
	rdb := testenv.Redis(t)
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Product(sku), keys.ProductLease(sku)) })
	p.loadStock(t, sku, 10)

	v, status := getProduct(t, p.URL, sku)
	want := productAnswer{SKU: sku, Name: "Flash item", PriceCents: 1999, Available: 10}
	if status != 200 || v != want {
		t.Fatalf("first view: %d %+v, want %+v", status, v, want)
	}
	a := post(t, newClient(t), p.URL, "view-1", orderBody(sku, 3, sku))
	if a.Status != 202 {
		t.Fatalf("order: %d %+v", a.Status, a.Error)
	}
	testkit.WaitFor(t, "the view to show the sale", 10*time.Second, func() (bool, error) {
		v, _ := getProduct(t, p.URL, sku)
		return v.Available == 7, nil
	})
	p.loadStock(t, sku, 20)
	if v, _ := getProduct(t, p.URL, sku); v.Available != 17 {
		t.Fatalf("after a stock load of 20 with 3 sold: available %d, want 17", v.Available)
	}
}
