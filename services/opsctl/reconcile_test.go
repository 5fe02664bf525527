package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// drifted points opsctl at the shared cluster and a fresh database and
// creates a SKU of 5 units whose order of 2 MySQL invoiced while Redis
// never heard of it (a commit a failover lost).
func drifted(t *testing.T) (*redis.ClusterClient, *stock.Stock, *store.Store, string) {
	t.Helper()
	ctx := context.Background()
	rdb, dsn := testenv.Redis(t), testenv.MySQLDSN(t)
	t.Setenv("SURGE_MYSQL_DSN", dsn)
	t.Setenv("SURGE_REDIS_ADDRS", strings.Join(testenv.RedisAddrs(), ","))
	t.Setenv("SURGE_REDIS_PASSWORD", testenv.RedisPassword())
	db := testkit.OpenStore(t, dsn)
	sku := testkit.StockSKU(t, db, rdb, "cli-rec-", 5, testkit.Product{})
	st := stock.New(rdb, stock.Options{})
	o := order.Order{ID: order.IDFor(sku, "k", 0), SKU: sku, Qty: 2, CustomerID: sku}
	if _, err := db.Process(ctx, o, 0); err != nil {
		t.Fatal(err)
	}
	return rdb, st, db, sku
}

// reconcileJSON runs opsctl reconcile --json and decodes its report.
func reconcileJSON(t *testing.T, args ...string) (int, admin.ReconcileReport) {
	t.Helper()
	code, out, errOut := opsctl(append([]string{"reconcile", "--json"}, args...)...)
	var rep admin.ReconcileReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reconcile %v: exit %d, report is not JSON: %v\nstdout: %s\nstderr: %s", args, code, err, out, errOut)
	}
	return code, rep
}

// TestReconcileCommand: a dry run reports the lost commit and changes
// nothing in Redis, a run repairs it, the next finds it consistent, each
// with the exit code of reconciler once, which the JSON report repeats:
// drift found or repaired exits 1 only with --detailed-exitcode.
func TestReconcileCommand(t *testing.T) {
	ctx := context.Background()
	_, st, _, sku := drifted(t)
	before, err := st.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}

	code, rep := reconcileJSON(t, "--sku", sku, "--dry-run", "--detailed-exitcode")
	if code != reconcile.ExitRepaired || rep.ExitCode != code || !rep.DryRun || len(rep.SKUs) != 1 ||
		rep.SKUs[0].Outcome != admin.SKURepaired || rep.SKUs[0].After.Sold != 2 {
		t.Fatalf("dry run: exit %d, report %+v; want exit 1 and sold 2 to come", code, rep)
	}
	if code, rep = reconcileJSON(t, "--sku", sku, "--dry-run"); code != reconcile.ExitConsistent || rep.ExitCode != code ||
		rep.SKUs[0].Outcome != admin.SKURepaired {
		t.Fatalf("dry run without --detailed-exitcode: exit %d, report %+v; want exit 0, repairs to come", code, rep)
	}
	if after, err := st.View(ctx, sku); err != nil || !cmp.Equal(after, before) {
		t.Fatalf("the dry run changed Redis: %+v -> %+v (%v)", before, after, err)
	}

	code, rep = reconcileJSON(t, "--sku", sku, "--sku", sku)
	if code != reconcile.ExitConsistent || rep.ExitCode != code || len(rep.SKUs) != 1 || rep.SKUs[0].Outcome != admin.SKURepaired {
		t.Fatalf("run: exit %d, report %+v; want the SKU repaired once, exit 0", code, rep)
	}
	v, err := st.View(ctx, sku)
	if err != nil || v.Stock != 5 || v.Sold != 2 || v.Avail != 3 || !v.Consistent() {
		t.Fatalf("after the run Redis holds %+v (%v), want stock 5 sold 2 avail 3", v, err)
	}

	code, out, _ := opsctl("reconcile", "--sku", sku)
	if code != reconcile.ExitConsistent || !strings.Contains(out, sku) || !strings.Contains(out, "consistent") ||
		!strings.Contains(out, "exit 0") {
		t.Errorf("second run: exit %d, want 0 and a table\n%s", code, out)
	}
}

// TestReconcileMistakes: every way a run cannot start has its exit code,
// and changes nothing.
func TestReconcileMistakes(t *testing.T) {
	ctx := context.Background()
	_, st, _, sku := drifted(t)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"invalid sku", []string{"--sku", "no spaces"}, exitUsage, "sku"},
		{"unknown flag", []string{"--all"}, exitUsage, "unknown flag: --all"},
		{"positional sku", []string{sku}, exitUsage, "--sku"},
		{"unknown sku", []string{"--sku", sku, "--sku", "no-such-" + sku}, exitNotFound, "unknown sku"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := opsctl(append([]string{"reconcile"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.msg) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d mentioning %q", code, out, stderr, tt.code, tt.msg)
			}
		})
	}
	if v, err := st.View(ctx, sku); err != nil || v.Sold != 0 {
		t.Errorf("the mistakes changed Redis: %+v (%v), want sold still 0", v, err)
	}
	if code, out, _ := opsctl("reconcile", "--help"); code != exitOK || !strings.Contains(out, "4  a SKU is unknown") {
		t.Errorf("reconcile help: exit %d\n%s", code, out)
	}
}

// TestReconcileBusy: while another run holds the SKU, the command waits
// for it, then reports the SKU busy with exit 3, having changed nothing.
func TestReconcileBusy(t *testing.T) {
	rdb, st, _, sku := drifted(t)
	release, err := reconcile.NewRedisLocker(rdb, reconcile.LockOptions{}).Lock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	code, rep := reconcileJSON(t, "--sku", sku)
	if code != reconcile.ExitBusy || len(rep.SKUs) != 1 || rep.SKUs[0].Outcome != admin.SKUBusy {
		t.Fatalf("exit %d, report %+v; want busy, exit 3", code, rep)
	}
	_, out, _ := opsctl("reconcile", "--json", "--sku", sku)
	var withErr struct{ Error jsonError }
	if err := json.Unmarshal([]byte(out), &withErr); err != nil || withErr.Error.Code != "busy" ||
		!strings.Contains(withErr.Error.Message, "1 busy") {
		t.Errorf("the busy report's error: %+v (%v)\n%s", withErr.Error, err, out)
	}
	if v, err := st.View(context.Background(), sku); err != nil || v.Sold != 0 {
		t.Errorf("a busy run changed Redis: %+v (%v)", v, err)
	}
}
