package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"surge/pkg/order"
	"surge/pkg/stock"
)

// TestSetStockRefusesBelowSoldAndReserved: a load below the units sold
// plus those reserved is refused with order.ErrConflict, a message naming
// both and the lowest stock allowed, and changes nothing; a load at that
// lowest stock passes and leaves nothing available.
func TestSetStockRefusesBelowSoldAndReserved(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 10)
	reserveTwoCommitFirst(t, s, sku)
	before := mustView(t, s, sku)
	_, err := s.SetStock(ctx, sku, 4, 0)
	if !errors.Is(err, order.ErrConflict) {
		t.Fatalf("load 4 with 2 sold and 3 reserved: %v, want a conflict", err)
	}
	for _, want := range []string{"sold 2", "reserved 3", "at least 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if after := mustView(t, s, sku); after.Stock != before.Stock || after.Avail != before.Avail || after.Sold != before.Sold {
		t.Fatalf("a refused load changed Redis: before %s, after %s", brief(before), brief(after))
	}
	v, err := s.SetStock(ctx, sku, 5, 0)
	if err != nil {
		t.Fatalf("load 5 with 2 sold and 3 reserved: %v", err)
	}
	if v.Stock != 5 || v.Avail != 0 || !v.Consistent() {
		t.Fatalf("after a load at the minimum: %s", brief(v))
	}
}

// TestSetStockFirstLoadRefusedWritesNothing: a first load below MySQL's
// sold count is refused before the sold counter is seeded.
func TestSetStockFirstLoadRefusedWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, -1)
	if _, err := s.SetStock(ctx, sku, 2, 3); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("first load of 2 with 3 sold in MySQL: %v, want a conflict", err)
	}
	if v := mustView(t, s, sku); v.Loaded || v.Sold != 0 {
		t.Fatalf("a refused first load wrote %s", brief(v))
	}
}

// TestRestockDownRacingReservations races buyers reserving one unit at a
// time against loads that lower the stock step by step: avail never goes
// below zero, and at the end every reservation won fits in the stock.
func TestRestockDownRacingReservations(t *testing.T) {
	ctx := context.Background()
	s, sku := setup(t, 200)
	var won atomic.Int64
	var next atomic.Int64
	stop := make(chan struct{})
	var buyers, watch sync.WaitGroup
	for range 16 {
		buyers.Go(func() {
			for {
				_, err := s.Reserve(ctx, ord(sku, int(next.Add(1)), 1))
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, order.ErrSoldOut):
					return
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := s.View(ctx, sku)
			if err != nil {
				t.Error(err)
				return
			}
			if v.Avail < 0 || !v.Consistent() {
				t.Errorf("during the race: %s", brief(v))
				return
			}
		}
	})
	var loaded, refused int
	for n := 190; n >= 0; n -= 10 {
		_, err := s.SetStock(ctx, sku, n, 0)
		switch {
		case err == nil:
			loaded++
		case errors.Is(err, order.ErrConflict):
			refused++
		default:
			t.Fatal(err)
		}
	}
	buyers.Wait()
	close(stop)
	watch.Wait()
	v := mustView(t, s, sku)
	if v.Avail < 0 || int64(v.Reserved) != won.Load() || v.Reserved > v.Stock {
		t.Fatalf("after the race: %s, %d reservations won (loads passed %d, refused %d)", brief(v), won.Load(), loaded, refused)
	}
	t.Logf("%d reservations won, final stock %d, loads passed %d, refused %d", won.Load(), v.Stock, loaded, refused)
}

// brief prints a view without its reservations.
func brief(v stock.View) string {
	return fmt.Sprintf("loaded=%v stock=%d avail=%d sold=%d reserved=%d", v.Loaded, v.Stock, v.Avail, v.Sold, v.Reserved)
}
