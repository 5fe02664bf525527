package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// TestOnce runs the cron command against the real engines: a SKU whose
// commit Redis lost is reported by a dry run, repaired by a run, and
// consistent afterwards, each with its exit code, which the report
// repeats: 0 for drift found or repaired unless --detailed-exitcode asks
// for 1.
func TestOnce(t *testing.T) {
	ctx := context.Background()
	_, st, sku := lostCommit(t)

	steps := []struct {
		args    []string
		code    int
		outcome admin.SKUOutcome
		sold    int
	}{
		{[]string{"once", "--sku", sku, "--dry-run", "--json"}, reconcile.ExitConsistent, admin.SKURepaired, 0},
		{[]string{"once", "--sku", sku, "--dry-run", "--json", "--detailed-exitcode"}, reconcile.ExitRepaired, admin.SKURepaired, 0},
		{[]string{"once", "--sku", sku, "--json"}, reconcile.ExitConsistent, admin.SKURepaired, 2},
		{[]string{"once", "--sku", sku, "--json", "--detailed-exitcode"}, reconcile.ExitConsistent, admin.SKUConsistent, 2},
		{[]string{"once", "--detailed-exitcode", "--sku", "no-such-sku", "--json"}, reconcile.ExitFailed, admin.SKUFailed, 2},
		{[]string{"once", "--sku", "no-such-sku", "--json"}, reconcile.ExitFailed, admin.SKUFailed, 2},
	}
	for _, s := range steps {
		var out, errOut bytes.Buffer
		code := run(ctx, s.args, &out, &errOut)
		if code != s.code {
			t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", s.args, code, s.code, &out, &errOut)
		}
		var rep admin.ReconcileReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: report is not JSON: %v\n%s", s.args, err, &out)
		}
		if len(rep.SKUs) != 1 || rep.SKUs[0].Outcome != s.outcome || rep.ExitCode != s.code {
			t.Errorf("%v: report %+v, want one SKU %s", s.args, rep, s.outcome)
		}
		if v, _ := st.View(ctx, sku); v.Sold != s.sold {
			t.Errorf("%v: redis sold %d, want %d", s.args, v.Sold, s.sold)
		}
	}

	// The same drift again, repaired with --detailed-exitcode: exit 1.
	rdb := testenv.Redis(t)
	if err := rdb.MSet(ctx, keys.Sold(sku), 0, keys.Avail(sku), 5).Err(); err != nil { // one slot: the hash tag
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(ctx, []string{"once", "--sku", sku, "--detailed-exitcode"}, &out, &bytes.Buffer{}); code != reconcile.ExitRepaired ||
		!strings.Contains(out.String(), "1 repaired") || !strings.Contains(out.String(), "exit 1") {
		t.Errorf("detailed repair, exit %d, want %d:\n%s", code, reconcile.ExitRepaired, &out)
	}
	if v, _ := st.View(ctx, sku); v.Sold != 2 {
		t.Errorf("after the detailed repair redis sold %d, want 2", v.Sold)
	}
	out.Reset()
	if code := run(ctx, []string{"once", "--sku", sku}, &out, &bytes.Buffer{}); code != reconcile.ExitConsistent ||
		!strings.Contains(out.String(), sku) || !strings.Contains(out.String(), "exit 0") {
		t.Errorf("text report, exit %d:\n%s", code, &out)
	}
	if code := run(ctx, []string{"once", "--nope"}, &out, &bytes.Buffer{}); code != reconcile.ExitFailed {
		t.Errorf("bad flag: exit %d, want %d", code, reconcile.ExitFailed)
	}
}

// lostCommit points the configuration at the real engines and a fresh
// database, and creates a SKU of 5 units with an order of 2 that MySQL
// invoiced and Redis never heard of.
func lostCommit(t *testing.T) (*store.Store, *stock.Stock, string) {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	db, dsn := testkit.Store(t)
	t.Setenv("SURGE_MYSQL_DSN", dsn)
	t.Setenv("SURGE_REDIS_ADDRS", strings.Join(testenv.RedisAddrs(), ","))
	t.Setenv("SURGE_REDIS_PASSWORD", testenv.RedisPassword())
	t.Setenv("SURGE_LOG_LEVEL", "error")

	sku := testkit.StockSKU(t, db, rdb, "rec-cmd-", 5, testkit.Product{})
	st := stock.New(rdb, stock.Options{})
	o := order.Order{ID: order.IDFor("c", sku, 0), SKU: sku, Qty: 2, CustomerID: "c"}
	if _, err := db.Process(ctx, o, 0); err != nil { // Redis never hears of it
		t.Fatal(err)
	}

	return db, st, sku
}

// TestServeByDefault runs the command without arguments: it serves the
// schedule until its context ends, a sweep repairs the SKU, and its
// metrics endpoint reports the sweep and the repair.
func TestServeByDefault(t *testing.T) {
	_, st, sku := lostCommit(t)
	queue := testenv.Unique("t.reconcile.")
	addr := freeAddr(t)
	t.Setenv("SURGE_RECONCILE_METRICS_ADDR", addr)
	t.Setenv("SURGE_RECONCILE_EVERY", "1s")
	t.Setenv("SURGE_RECONCILE_QUEUE", queue)
	t.Cleanup(func() { _ = asynq.NewInspectorFromRedisClient(testenv.Redis(t)).DeleteQueue(queue, true) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, &bytes.Buffer{}, &bytes.Buffer{}) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := st.View(context.Background(), sku)
		if err == nil && v.Sold == 2 && v.Consistent() {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no sweep repaired %s: %+v %v", sku, v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{`surge_reconcile_repairs_total{kind="commit_missing"} `, `surge_reconcile_runs_total{result="ok"} `,
		"surge_reconcile_last_success_timestamp_seconds "} {
		waitMetric(t, addr, want)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exit %d, want 0", code)
	}
}

// waitMetric scrapes addr until the sample named by prefix is above 0.
func waitMetric(t *testing.T, addr, prefix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, ok := scrape(addr, prefix); ok && v > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never above 0 on %s", prefix, addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scrape(addr, prefix string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestHelpAndVersion: help, once --help and --version answer on stdout
// with exit 0 before any configuration is read (a broken one here).
func TestHelpAndVersion(t *testing.T) {
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "forever")
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"once", "--help"}, {"once", "--sku", "x", "-h"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		if code != 0 || errOut.Len() > 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, &errOut)
		}
		for _, want := range []string{"--sku S", "--dry-run", "--json", "--detailed-exitcode", "reconciler --version",
			"1  with --detailed-exitcode: repairs were applied", "0  every SKU was consistent, or was repaired"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: usage lacks %q:\n%s", args, want, &out)
			}
		}
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &out, &out); code != 0 ||
		!strings.HasPrefix(out.String(), "reconciler version ") || !strings.Contains(out.String(), " go1.") {
		t.Errorf("--version: exit %d, %q", code, &out)
	}
}
