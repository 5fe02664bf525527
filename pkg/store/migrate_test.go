package store

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"surge/internal/testenv"
	migrations "surge/sql"
)

// migrationFiles is the number of embedded migrations; versions need not
// be consecutive (branches number theirs apart), so the newest version is
// migrationLatest.
func migrationFiles(t *testing.T) int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %d files", err, len(files))
	}
	return int64(len(files))
}

// migrationLatest is the highest version among the embedded migrations.
func migrationLatest(t *testing.T) int64 {
	t.Helper()
	files, _ := fs.Glob(migrations.FS, "*.sql")
	var latest int64
	for _, f := range files {
		v, err := strconv.ParseInt(strings.SplitN(f, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: no version: %v", f, err)
		}
		latest = max(latest, v)
	}
	return latest
}

// migrationTables is the number of tables the migrations create, goose's
// own version table included.
func migrationTables(t *testing.T) int {
	t.Helper()
	files, _ := fs.Glob(migrations.FS, "*.sql")
	n := 1
	for _, f := range files {
		b, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		n += strings.Count(up, "CREATE TABLE ") - strings.Count(up, "DROP TABLE ")
	}
	return n
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testenv.MySQLDSN(t))
	want, wantTables := migrationLatest(t), migrationTables(t)

	cur, latest, err := s.MigrationVersion(ctx)
	if err != nil || cur != 0 || latest != want {
		t.Fatalf("before Migrate: current=%d latest=%d err=%v; want 0, %d", cur, latest, err, want)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"); n != 0 {
		t.Fatalf("MigrationVersion created %d tables on an empty database", n)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	tables := count(t, s, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()")
	rows := count(t, s, "SELECT COUNT(*) FROM goose_db_version")
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if got := count(t, s, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"); got != tables || tables != wantTables {
		t.Fatalf("tables after second Migrate = %d, after first = %d, want %d (the migrations' + goose's)", got, tables, wantTables)
	}
	if got := count(t, s, "SELECT COUNT(*) FROM goose_db_version"); got != rows {
		t.Fatalf("goose_db_version rows %d -> %d: second Migrate applied something", rows, got)
	}
	cur, latest, err = s.MigrationVersion(ctx)
	if err != nil || cur != want || latest != want {
		t.Fatalf("after Migrate: current=%d latest=%d err=%v; want %d, %d", cur, latest, err, want, want)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	stores := []*Store{openStore(t, dsn), openStore(t, dsn), openStore(t, dsn)}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate #%d: %v", i, err)
		}
	}
	files, want := migrationFiles(t), migrationLatest(t)
	// goose records version 0 plus one row per migration, each exactly once.
	if got := count(t, stores[0], "SELECT COUNT(*) FROM goose_db_version"); int64(got) != files+1 {
		t.Fatalf("goose_db_version has %d rows, want %d", got, files+1)
	}
	cur, _, err := stores[1].MigrationVersion(ctx)
	if err != nil || cur != want {
		t.Fatalf("MigrationVersion = %d, %v; want %d", cur, err, want)
	}
}

// TestMigrateWaitsForAnotherMigrator holds the migration lock as another
// process would and checks that Migrate waits for it before touching the
// schema, then completes.
func TestMigrateWaitsForAnotherMigrator(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	holder, migrator := openStore(t, dsn), openStore(t, dsn)
	conn, err := holder.DB().Conn(ctx)
	if err != nil {
		t.Fatalf("holder connection: %v", err)
	}
	defer conn.Close()
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", 5)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("take the migration lock: %d, %v", got, err)
	}
	done := make(chan error, 1)
	go func() { done <- migrator.Migrate(ctx) }()

	waiting := "SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND info LIKE 'SELECT GET_LOCK(%'"
	for deadline := time.Now().Add(10 * time.Second); count(t, holder, waiting) == 0; {
		select {
		case err := <-done:
			t.Fatalf("Migrate returned (%v) while another migrator held the lock", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Migrate never waited for the migration lock")
		}
	}
	if n := count(t, holder, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"); n != 0 {
		t.Fatalf("Migrate created %d tables before getting the lock", n)
	}
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK("+lockName+")").Scan(&got); err != nil || got != 1 {
		t.Fatalf("release the migration lock: %d, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Migrate after the lock was released: %v", err)
	}
	if cur, latest, err := migrator.MigrationVersion(ctx); err != nil || cur != latest {
		t.Fatalf("MigrationVersion = %d, %d, %v; want current == latest", cur, latest, err)
	}
}

// TestMigrateWithOneConnection: the migration lock does not take a pooled
// connection, so a pool of one still migrates.
func TestMigrateWithOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, testenv.MySQLDSN(t), Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with MaxOpenConns 1: %v", err)
	}
}
