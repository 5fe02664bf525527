package console

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// BenchmarkBoard is one read of the sale board of 50 SKUs, each with 40
// open reservations: before, a MySQL query and the view script (the whole
// reservation hash) per SKU; after, one MySQL query and one Redis pipeline
// of MGET + HLEN per SKU. Before, every open tab paid it every second;
// after, one read per interval serves every tab (TestSnapshotSharedByViewers).
func BenchmarkBoard(b *testing.B) {
	ctx := context.Background()
	db, st, skus := saleEngines(b, boardLimit)
	for _, sku := range skus {
		for i := range 40 {
			o := order.Order{ID: order.IDFor("bench", fmt.Sprint(sku, i), 0), SKU: sku, Qty: 1, CustomerID: "bench"}
			if _, err := st.Reserve(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
	}
	rdb := testenv.Redis(b)
	b.Run("before=show-per-sku", func(b *testing.B) {
		show := &ops.Stock{DB: db, Redis: st}
		for b.Loop() {
			if err := boardShowEach(ctx, db, show); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("after=counters-pipeline", func(b *testing.B) {
		c := &Console{Store: db, Counters: func(ctx context.Context, skus []string) ([]stock.Counters, error) {
			return stock.ReadCounters(ctx, rdb, skus)
		}}
		c.setDefaults()
		c.rates, c.trends = newRates(c.Now), &trends{}
		for b.Loop() {
			if d := c.buildBoard(ctx, ""); d.Error != "" || len(d.Rows) != boardLimit || d.Rows[0].RedisResv != 40 {
				b.Fatalf("board: %+v", d)
			}
		}
	})
}

// boardShowEach is how the board was read before snapshots: the listing,
// then each SKU's Show, eight at a time.
func boardShowEach(ctx context.Context, db *store.Store, show *ops.Stock) error {
	ps, err := db.RecentProducts(ctx, "", boardLimit)
	if err != nil {
		return err
	}
	reps := make([]admin.StockReport, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			reps[i], errs[i] = show.Show(ctx, p.SKU)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return err
		}
		if reps[i].Redis.Reserved != 40 {
			return fmt.Errorf("sku %s reserved %d", ps[i].SKU, reps[i].Redis.Reserved)
		}
	}
	return nil
}
