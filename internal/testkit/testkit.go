// Package testkit is the set-up that integration tests repeat: a migrated
// store on a fresh database, a SKU stocked in MySQL and Redis, waiting for
// a condition. It sits above internal/testenv (which only finds the
// engines) and imports the adapters, so the adapters' own internal tests
// cannot use it; every other test can.
package testkit

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/stock"
	"surge/pkg/store"
	migrations "surge/sql"
)

// Store opens a store on a fresh database for the calling test (see
// testenv.MySQLDSN), migrated, closed at cleanup. Its DSN is returned too,
// for tests that hand it to a program.
func Store(t testing.TB) (*store.Store, string) {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	return OpenStore(t, dsn), dsn
}

// OpenStore opens a store on dsn and migrates it; it is closed at cleanup.
func OpenStore(t testing.TB, dsn string) *store.Store {
	t.Helper()
	db := openUnmigrated(t, dsn)
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// Product is what StockSKU creates in MySQL beside the stock; the zero
// value leaves name and price to the store's defaults.
type Product struct {
	Name       string
	PriceCents int64
}

// StockSKU creates a SKU named from prefix with units in stock in MySQL
// and loads the same stock into Redis (nothing sold), removing its Redis
// keys at cleanup. It returns the SKU.
func StockSKU(t testing.TB, db *store.Store, rdb *redis.ClusterClient, prefix string, units int, p Product) string {
	t.Helper()
	ctx := context.Background()
	sku := testenv.Unique(prefix)
	testenv.CleanupSKU(t, rdb, sku)
	var name *string
	var price *int64
	if p.Name != "" {
		name, price = &p.Name, &p.PriceCents
	}
	if _, err := db.SetStock(ctx, sku, units, name, price); err != nil {
		t.Fatal(err)
	}
	if _, err := stock.New(rdb, stock.Options{}).SetStock(ctx, sku, units, 0); err != nil {
		t.Fatal(err)
	}
	return sku
}

// WaitFor polls cond every 50 ms until it holds, and fails the test when
// timeout passes first, with cond's last error.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// OrderStatuses counts the orders among ids that MySQL holds, by status
// (ids it does not hold are not counted), querying 500 ids at a time.
func OrderStatuses(ctx context.Context, db *store.Store, ids []string) (map[string]int, error) {
	counts := map[string]int{}
	for start := 0; start < len(ids); start += 500 {
		q, args, err := sqlx.In("SELECT status, COUNT(*) FROM orders WHERE order_id IN (?) GROUP BY status",
			ids[start:min(start+500, len(ids))])
		if err != nil {
			return nil, err
		}
		rows, err := db.DB().QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				rows.Close()
				return nil, err
			}
			counts[status] += n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// openUnmigrated opens a store on dsn as it is; it is closed at cleanup.
func openUnmigrated(t testing.TB, dsn string) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// StoreAtVersion opens a store on dsn with the schema migrated up to
// version only (one less than the newest: an older build's schema); it
// is closed at cleanup. It returns the store and the newest version.
func StoreAtVersion(t testing.TB, dsn string, version int64) (db *store.Store, latest int64) {
	t.Helper()
	ctx := context.Background()
	db = openUnmigrated(t, dsn)
	p, err := goose.NewProvider(goose.DialectMySQL, db.DB().DB, migrations.FS,
		goose.WithLogger(goose.NopLogger()), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	return db, sources[len(sources)-1].Version
}

// LatestMigration is the newest migration version this build embeds.
func LatestMigration(t testing.TB) int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %d files", err, len(files))
	}
	var v int64
	if _, err := fmt.Sscanf(files[len(files)-1], "%d_", &v); err != nil {
		t.Fatalf("migration %s: %v", files[len(files)-1], err)
	}
	return v
}
