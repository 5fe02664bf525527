package stock_test

import (
	"context"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/stock"
)

// TestReadCounters reads SKUs on different slots in one pipeline: a
// loaded SKU with sold units and open reservations, and one never loaded;
// the counters agree with the full view.
func TestReadCounters(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 10)
	reserveTwoCommitFirst(t, s, sku)
	missing := testenv.Unique("stk-none-")
	got, err := stock.ReadCounters(ctx, testenv.Redis(t), []string{sku, missing})
	if err != nil {
		t.Fatal(err)
	}
	v := mustView(t, s, sku)
	want := stock.Counters{SKU: sku, Loaded: true, Stock: v.Stock, Avail: v.Avail, Sold: v.Sold,
		Reserved: v.Reserved, Holds: len(v.Reservations)}
	if len(got) != 2 || got[0] != want || !got[0].Balanced() {
		t.Fatalf("counters = %+v, want %+v first, balanced", got, want)
	}
	if got[1] != (stock.Counters{SKU: missing}) {
		t.Errorf("never loaded: %+v, want zero and not loaded", got[1])
	}
	if c, err := stock.ReadCounters(ctx, testenv.Redis(t), nil); err != nil || len(c) != 0 {
		t.Errorf("no SKU: %v, %v", c, err)
	}
}

func TestCountersBalanced(t *testing.T) {
	for _, tt := range []struct {
		c    stock.Counters
		want bool
	}{
		{stock.Counters{Reserved: 0, Holds: 0}, true},
		{stock.Counters{Reserved: 5, Holds: 2}, true},
		{stock.Counters{Reserved: -1, Holds: 0}, false},
		{stock.Counters{Reserved: 3, Holds: 0}, false},
		{stock.Counters{Reserved: 0, Holds: 1}, false},
		{stock.Counters{Reserved: 1, Holds: 2}, false},
	} {
		if got := tt.c.Balanced(); got != tt.want {
			t.Errorf("%+v.Balanced() = %v, want %v", tt.c, got, tt.want)
		}
	}
}
