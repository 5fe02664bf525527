package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/order"
)

func TestSetStock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	name, price := "Red kettle", int64(2599)

	p, err := s.SetStock(ctx, "kettle", 10, &name, &price)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want := Product{SKU: "kettle", Name: name, PriceCents: price, Stock: 10}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("create returned (-want +got):\n%s", diff)
	}
	// nil name and price keep the current values.
	if p, err = s.SetStock(ctx, "kettle", 12, nil, nil); err != nil {
		t.Fatalf("update: %v", err)
	}
	want.Stock = 12
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("update returned (-want +got):\n%s", diff)
	}
	if _, err := s.Process(ctx, ord("o-1", "kettle", 3), 0); err != nil {
		t.Fatalf("Process: %v", err)
	}
	_, err = s.SetStock(ctx, "kettle", 2, nil, nil)
	if !errors.Is(err, order.ErrConflict) || !strings.Contains(err.Error(), "sold=3") {
		t.Fatalf("stock below sold: err = %v, want ErrConflict saying sold=3", err)
	}
	if _, err = s.SetStock(ctx, "kettle", 3, nil, nil); err != nil {
		t.Fatalf("stock equal to sold: %v", err)
	}
	if _, err := s.SetStock(ctx, "other", 0, nil, nil); err != nil {
		t.Fatalf("create with defaults: %v", err)
	}
	got, err := s.ListProducts(ctx)
	if err != nil {
		t.Fatalf("ListProducts: %v", err)
	}
	wantAll := []Product{
		{SKU: "kettle", Name: name, PriceCents: price, Stock: 3, Sold: 3},
		{SKU: "other"},
	}
	if diff := cmp.Diff(wantAll, got); diff != "" {
		t.Fatalf("products (-want +got):\n%s", diff)
	}
}

func TestSetStockRefusesInvalidInput(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	long, negative := strings.Repeat("x", order.MaxNameLen+1), int64(-1)
	cases := map[string]func() error{
		"bad sku":        func() error { _, err := s.SetStock(ctx, "a{b}", 1, nil, nil); return err },
		"negative stock": func() error { _, err := s.SetStock(ctx, "a", -1, nil, nil); return err },
		"long name":      func() error { _, err := s.SetStock(ctx, "a", 1, &long, nil); return err },
		"negative price": func() error { _, err := s.SetStock(ctx, "a", 1, nil, &negative); return err },
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if ps, _ := s.ListProducts(ctx); len(ps) != 0 {
		t.Fatalf("invalid input wrote %v", ps)
	}
}

func TestSKUsAreCaseSensitive(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	seed(t, s, "abc", 1, 1)
	seed(t, s, "ABC", 2, 1)
	if ps, err := s.ListProducts(ctx); err != nil || len(ps) != 2 {
		t.Fatalf("ListProducts = %v, %v; want abc and ABC apart", ps, err)
	}
}

// TestSetStockConcurrentCreate has many operators create the same product
// at once: none fails, and one row results.
func TestSetStockConcurrentCreate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.SetStock(ctx, "hot", 100+i, nil, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("SetStock #%d: %v", i, err)
		}
	}
	p, err := s.Product(ctx, "hot")
	if err != nil || p.Stock < 100 || p.Stock >= 120 {
		t.Fatalf("Product = %+v, %v; want stock set by one of the calls", p, err)
	}
	if _, err := s.Product(ctx, "cold"); !errors.Is(err, order.ErrUnknownSKU) {
		t.Fatalf("missing product: err = %v, want ErrUnknownSKU", err)
	}
}
