package store

import (
	"context"
	"errors"
	"testing"

	"surge/pkg/admin"
	"surge/pkg/order"
)

// TestStockLoadsAudited: every load that commits leaves one row naming
// who loaded and through what, in its own transaction: a load refused (by
// MySQL below sold, or by the loader, i.e. Redis) leaves none; a load the
// loader asks to keep despite its error leaves one.
func TestStockLoadsAudited(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dana := admin.WithLoadedBy(ctx, admin.LoadedBy{Actor: "dana", Via: admin.ViaConsole})
	if _, err := s.SetStock(dana, "lamp", 10, nil, nil); err != nil {
		t.Fatal(err)
	}
	ops := admin.WithLoadedBy(ctx, admin.LoadedBy{Actor: "root", Via: admin.ViaOpsctl})
	if _, err := s.SetStock(ops, "lamp", 25, nil, nil); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("redis refused")
	if _, err := s.SetStockWith(ops, "lamp", 30, nil, nil, nil, func(context.Context, Product, Product) (*Product, error) {
		return nil, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("refused load: %v", err)
	}
	if _, err := s.SetStockWith(ctx, "lamp", 40, nil, nil, nil, func(_ context.Context, _, next Product) (*Product, error) {
		return &next, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("kept load: %v", err)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE products SET sold = 5 WHERE sku = 'lamp'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetStock(ops, "lamp", 3, nil, nil); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("below sold: %v", err)
	}
	loads, err := s.StockLoads(ctx, "lamp", 10)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		before      int64
		created     bool
		after, sold int
		actor, via  string
	}
	want := []row{{25, false, 40, 0, "", "unknown"}, {10, false, 25, 0, "root", "opsctl"}, {0, true, 10, 0, "dana", "console"}}
	if len(loads) != len(want) {
		t.Fatalf("%d loads %+v, want %d (the refused ones leave no row)", len(loads), loads, len(want))
	}
	for i, l := range loads {
		got := row{l.StockBefore.Int64, l.Created(), l.StockAfter, l.Sold, l.Actor, l.Via}
		if got != want[i] || l.SKU != "lamp" || l.At.IsZero() {
			t.Errorf("load %d = %+v, want %+v", i, got, want[i])
		}
	}
	if other, err := s.StockLoads(ctx, "kettle", 10); err != nil || len(other) != 0 {
		t.Errorf("another SKU's loads: %v, %v", other, err)
	}
}
