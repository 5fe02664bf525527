package store

import (
	"context"
	"testing"
	"time"

	"surge/internal/testenv"
)

// A worker lost between its stock UPDATE and its COMMIT (its host gone, its
// link cut) leaves a session inside a write transaction that the server
// sees as merely idle. Its row lock on the product must not outlive
// Options.IdleWriteTxTimeout: another worker's UPDATE of the same product
// goes through soon after, not after innodb_lock_wait_timeout (50 s) or
// wait_timeout (8 h).
func TestLostWriterReleasesTheProductRow(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	lost, err := Open(ctx, dsn, Options{IdleWriteTxTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lost.Close() })
	if err := lost.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := lost.DB().QueryRowContext(ctx, "SELECT @@SESSION."+idleTxVar).Scan(&v); err != nil || v != "2" {
		t.Fatalf("the pool's sessions have %s=%q (%v), want 2", idleTxVar, v, err)
	}
	if _, err := lost.SetStock(ctx, "hot", 10, nil, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := lost.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.ExecContext(ctx, guardSQL, 1, "hot", 1); err != nil {
		t.Fatal(err)
	}
	// The writer sends nothing more: from the server's side, a lost host.

	other, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := other.DB().ExecContext(wctx, guardSQL, 1, "hot", 1); err != nil {
		t.Fatalf("the other worker's UPDATE after %v: %v (the lost writer's row lock was kept)", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("the lost writer's row lock was released %v after the other worker asked", time.Since(start).Round(time.Millisecond))
	var sold int
	if err := other.DB().QueryRowContext(ctx, "SELECT sold FROM products WHERE sku = 'hot'").Scan(&sold); err != nil || sold != 1 {
		t.Fatalf("sold %d (%v): want only the other worker's unit, the lost writer's rolled back", sold, err)
	}
}
