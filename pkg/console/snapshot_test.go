package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// countingStore counts the board's MySQL reads.
type countingStore struct {
	*store.Store
	recent atomic.Int64
}

func (s *countingStore) RecentProducts(ctx context.Context, search string, limit int) ([]store.LoadedProduct, error) {
	s.recent.Add(1)
	return s.Store.RecentProducts(ctx, search, limit)
}

// countingShow counts the SKU pages' reads.
type countingShow struct {
	*ops.Stock
	shows atomic.Int64
}

func (s *countingShow) Show(ctx context.Context, sku string) (admin.StockReport, error) {
	s.shows.Add(1)
	return s.Stock.Show(ctx, sku)
}

// saleEngines opens a migrated store in a database of its own and the
// cluster, and loads n SKUs of 100 units through ops.Stock.
func saleEngines(t testing.TB, n int) (*store.Store, *stock.Stock, []string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLDSN(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	if err := stock.LoadScripts(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	st := stock.New(rdb, stock.Options{})
	svc := &ops.Stock{DB: db, Redis: st}
	skus := make([]string, n)
	for i := range skus {
		skus[i] = testenv.Unique(fmt.Sprintf("board%02d-", i))
		testenv.CleanupSKU(t, rdb, skus[i])
		units := 100
		if _, err := svc.Load(ctx, skus[i], admin.LoadRequest{Stock: &units}); err != nil {
			t.Fatal(err)
		}
	}
	return db, st, skus
}

// TestSnapshotSharedByViewers: 40 viewers polling the board and the health
// page 10 times each, the clock moving one interval between polls, cause
// one snapshot per interval: 10 board builds (10 MySQL reads, 10 Redis
// pipelines), 10 health builds and 10 reads of a SKU's live row, for 400
// views of each, not 400.
func TestSnapshotSharedByViewers(t *testing.T) {
	db, st, skus := saleEngines(t, 3)
	show := &countingShow{Stock: &ops.Stock{DB: db, Redis: st}}
	rdb := testenv.Redis(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var redisReads, healthReads atomic.Int64
	cs := &countingStore{Store: db}
	c := &Console{Token: "s3cret", Store: cs, Stock: show, Now: clock, SnapshotEvery: time.Second,
		Counters: func(ctx context.Context, skus []string) ([]stock.Counters, error) {
			redisReads.Add(1)
			time.Sleep(5 * time.Millisecond) // a build in flight while others ask
			return stock.ReadCounters(ctx, rdb, skus)
		},
		Health: &Health{Checks: []Probe{{Name: "probe", Ping: func(context.Context) error { healthReads.Add(1); return nil }}}},
	}
	h := c.Handler()
	ck := signedIn(t, h, "s3cret", "dana")

	const viewers, polls = 40, 10
	for range polls {
		var wg sync.WaitGroup
		for range viewers {
			for _, path := range []string{"/console/api/board", "/console/", "/console/health", "/console/api/skus/" + skus[0]} {
				wg.Go(func() {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.AddCookie(ck)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						t.Errorf("GET %s: %d", path, rec.Code)
					}
				})
			}
		}
		wg.Wait()
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
	}
	t.Logf("%d viewers x %d polls of the board (page + JSON), of health and of a SKU: %d board builds (%d MySQL reads, %d Redis pipelines), %d health builds, %d SKU reads",
		viewers, polls, c.boards.builds.Load(), cs.recent.Load(), redisReads.Load(), c.healths.builds.Load(), show.shows.Load())
	for name, got := range map[string]int64{
		"board builds": c.boards.builds.Load(), "MySQL reads": cs.recent.Load(), "Redis pipelines": redisReads.Load(),
		"health builds": c.healths.builds.Load(), "health probes": healthReads.Load(), "SKU reads": show.shows.Load(),
	} {
		if got != polls {
			t.Errorf("%s = %d for %d viewers x %d polls, want %d (one per interval)", name, got, viewers, polls, polls)
		}
	}
}

// TestSnapshotRealClock: on the wall clock, 40 viewers polling every
// 20 ms for 10 polls with a 100 ms interval cause at most one build per
// interval elapsed (plus the first).
func TestSnapshotRealClock(t *testing.T) {
	var builds atomic.Int64
	s := newSnapshots(100*time.Millisecond, time.Now, func(ctx context.Context, _ string) int {
		time.Sleep(2 * time.Millisecond)
		return int(builds.Add(1))
	})
	start := time.Now()
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			for range 10 {
				if s.get(context.Background(), "") == 0 {
					t.Error("a viewer got no snapshot")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	limit := int64(elapsed/(100*time.Millisecond)) + 1
	t.Logf("400 polls over %v: %d builds (at most %d)", elapsed.Round(time.Millisecond), builds.Load(), limit)
	if got := builds.Load(); got > limit || got < 1 {
		t.Errorf("%d builds over %v, want 1..%d", got, elapsed, limit)
	}
}

// TestSnapshotViewerGone: a viewer whose request ends leaves the build to
// finish for the others.
func TestSnapshotViewerGone(t *testing.T) {
	release := make(chan struct{})
	s := newSnapshots(time.Second, time.Now, func(ctx context.Context, _ string) string {
		<-release
		return "board"
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := s.get(ctx, ""); got != "" {
		t.Fatalf("a gone viewer got %q", got)
	}
	close(release)
	if got := s.get(context.Background(), ""); got != "board" {
		t.Fatalf("next viewer got %q", got)
	}
	if n := s.builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1 (the gone viewer's build served the next)", n)
	}
}
