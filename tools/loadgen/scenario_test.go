package loadgen_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/profile"
	"surge/pkg/store"
	"surge/tools/loadgen"
	"surge/tools/naivesql"
)

// A whole scenario against the naive SQL server: stock loaded, orders
// sent, invoices waited for and checked, series sampled, memory read.
func TestScenarioAgainstTheNaiveServer(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLDSN(t), store.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&naivesql.Server{DB: db.DB().DB, Log: slog.Default()}).Handler())
	t.Cleanup(srv.Close)
	sc := loadgen.Scenario{
		Label:       "naive",
		Options:     loadgen.Options{Concurrency: 8, Requests: 200},
		Orders:      loadgen.NewOrders(loadgen.Orders{Client: loadgen.NewOrderClient(8), BaseURL: srv.URL, SKU: "sc", RunID: testenv.Unique("sc")}),
		Stock:       25,
		StockAPI:    loadgen.StockAPI{Client: loadgen.NewHTTPClient(2), BaseURL: srv.URL},
		Ledger:      &loadgen.Ledger{DB: db.DB().DB},
		Check:       true,
		SampleEvery: 10 * time.Millisecond,
		Processes:   map[string]int{"self": os.Getpid()},
	}
	rep, err := sc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Check == nil || !rep.Check.OK || rep.Check.Accepted != 25 || rep.Check.Books.Invoices != 25 {
		t.Fatalf("check %+v: want 25 of 200 orders sold and invoiced", rep.Check)
	}
	if rep.DrainSeconds == nil || *rep.DrainSeconds < 0 {
		t.Fatalf("drain %v: the naive server writes invoices before it answers", rep.DrainSeconds)
	}
	if len(rep.Series) < 2 || rep.Series[len(rep.Series)-1].Probes["invoiced"] != 25 {
		t.Fatalf("series %+v: want samples ending with 25 invoiced", rep.Series)
	}
	if rep.Processes["self"].PeakRSSMB <= 0 {
		t.Fatalf("processes %+v: want this process's peak RSS", rep.Processes)
	}
}

func TestAuditRecordsFindsKeysThatNeverExpire(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tag := "{" + testenv.Unique("audit-") + "}:"
	t.Cleanup(func() { rdb.Del(ctx, tag+"ttl", tag+"forever") })
	if err := rdb.Set(ctx, tag+"ttl", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, tag+"forever", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := loadgen.AuditRecords(ctx, rdb, []string{tag + "ttl", tag + "forever", tag + "absent"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Checked != 3 || a.Missing != 1 || a.NoTTL != 1 || a.MaxTTLSeconds < 55 || a.MaxTTLSeconds > 60 || a.AvgBytes <= 0 {
		t.Fatalf("audit %+v: want 3 checked, 1 missing, 1 without TTL, max TTL about 60 s", a)
	}
}

func TestReclaimExpiredDropsExpiredKeys(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tag := "{" + testenv.Unique("reclaim-") + "}:"
	const n = 200
	pipe := rdb.Pipeline()
	for i := range n {
		pipe.Set(ctx, tag+strconv.Itoa(i), "x", time.Millisecond)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	slot, err := rdb.ClusterKeySlot(ctx, tag).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// CLUSTER GETKEYSINSLOT lists keys held in memory, expired or not. Other
	// tests may hold keys in the same slot, so only this test's are counted.
	before := keysInSlotWithPrefix(ctx, t, rdb, slot, tag)
	if before < n {
		t.Skipf("Redis reclaimed the keys on its own first (%d of %d left in the slot)", before, n)
	}
	if err := loadgen.ReclaimExpired(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	if after := keysInSlotWithPrefix(ctx, t, rdb, slot, tag); after != 0 {
		t.Fatalf("slot holds %d of this test's keys after ReclaimExpired, %d before: want the expired ones gone", after, before)
	}
}

func keysInSlotWithPrefix(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, slot int64, prefix string) int {
	t.Helper()
	keys, err := rdb.ClusterGetKeysInSlot(ctx, int(slot), 100000).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func TestCPUProfilesWritesTheServiceProfile(t *testing.T) {
	// One process runs one CPU profile at a time: one service here.
	srv := httptest.NewServer(profile.Handler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	wait := loadgen.CPUProfiles{URLs: map[string]string{"gateway": srv.URL}, Dir: dir, Seconds: 1}.Start(context.Background())
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"gateway.cpu.pb.gz", "gateway.goroutines.txt"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v (stat %v)", f, err, st)
		}
	}
	bad := loadgen.CPUProfiles{URLs: map[string]string{"x": srv.URL + "/nothing"}, Dir: dir, Seconds: 1}.Start(context.Background())
	if err := bad(); err == nil {
		t.Fatal("a profile URL answering 404 was not reported")
	}
}
