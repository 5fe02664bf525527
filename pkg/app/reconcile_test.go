package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/admin"
	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// reconcileAnswer is any answer of POST /v1/admin/reconcile: a report, or
// an error with the report of the run when there was one.
type reconcileAnswer struct {
	admin.ReconcileReport
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Failed *admin.ReconcileReport `json:"report"`
}

func postReconcile(t *testing.T, p *pipeline, body string) (int, reconcileAnswer) {
	t.Helper()
	return reconcileDo(t, adminRequest(p, http.MethodPost, "/v1/admin/reconcile", body, ""))
}

func reconcileDo(t *testing.T, req *http.Request) (int, reconcileAnswer) {
	t.Helper()
	var a reconcileAnswer
	code := adminDo(t, req, &a)
	return code, a
}

// gatewayOnly runs a gateway (no workers) on c.
func gatewayOnly(t *testing.T, c config.Common, cfg app.GatewayConfig) *pipeline {
	t.Helper()
	cfg.Common, cfg.AdminToken = c, "test-token"
	url, g := startGatewayConfig(t, cfg)
	return &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", Stock: g.Stock, Cfg: c, DB: openDB(t, c.MySQL.DSN)}
}

// lostCommit loads a SKU of 5 units through the admin API, then has MySQL
// invoice an order of 2 that Redis never hears of (a commit a failover
// lost). db must be able to write orders (the root user, not the gateway).
func lostCommit(t *testing.T, p *pipeline, db *store.Store) string {
	t.Helper()
	sku := testenv.Unique("adm-rec-")
	p.loadStock(t, sku, 5)
	o := order.Order{ID: order.IDFor(sku, "k", 0), SKU: sku, Qty: 2, CustomerID: sku}
	if _, err := db.Process(context.Background(), o, 0); err != nil {
		t.Fatal(err)
	}
	return sku
}

// TestAdminReconcile: the admin endpoint refuses a missing token and bad
// or unknown SKUs without changing anything, reports the drift on a dry
// run, repairs it, then finds the SKU consistent.
func TestAdminReconcile(t *testing.T) {
	ctx := context.Background()
	p := gatewayOnly(t, commonConfig(t), app.GatewayConfig{})
	sku := lostCommit(t, p, p.DB)
	before, err := p.Stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}

	resp, err := apitest.Client(t).Post(p.Admin+"/v1/admin/reconcile", "application/json", strings.NewReader(`{"skus":["`+sku+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", resp.StatusCode)
	}
	// invalid: the body breaks the document's schema on purpose.
	refusals := []struct {
		body    string
		status  int
		code    string
		invalid bool
	}{
		{`{"skus":["no spaces"]}`, http.StatusBadRequest, "invalid_request", true},
		{`{"skus":"` + sku + `"}`, http.StatusBadRequest, "invalid_request", true},
		{`{"sku":["` + sku + `"]}`, http.StatusBadRequest, "invalid_request", true},
		{`{"skus":["` + sku + `","no-such-` + sku + `"]}`, http.StatusNotFound, "unknown_sku", false},
	}
	for _, r := range refusals {
		req := adminRequest(p, http.MethodPost, "/v1/admin/reconcile", r.body, "")
		if r.invalid {
			req = apitest.Invalid(req)
		}
		if status, a := reconcileDo(t, req); status != r.status || a.Error.Code != r.code || a.Error.Message == "" {
			t.Errorf("%s: %d %+v, want %d %s", r.body, status, a.Error, r.status, r.code)
		}
	}
	if v, err := p.Stock.View(ctx, sku); err != nil || !cmp.Equal(v, before) {
		t.Fatalf("a refused request changed Redis: %+v -> %+v (%v)", before, v, err)
	}

	steps := []struct {
		body    string
		outcome admin.SKUOutcome
		sold    int
	}{
		{`{"skus":["` + sku + `"],"dry_run":true}`, admin.SKURepaired, 0},
		{`{"skus":["` + sku + `"]}`, admin.SKURepaired, 2},
		{`{"skus":["` + sku + `"]}`, admin.SKUConsistent, 2},
	}
	for _, s := range steps {
		status, a := postReconcile(t, p, s.body)
		if status != http.StatusOK || len(a.SKUs) != 1 || a.SKUs[0].SKU != sku || a.SKUs[0].Outcome != s.outcome {
			t.Fatalf("%s: %d %+v, want 200 and %s", s.body, status, a, s.outcome)
		}
		v, err := p.Stock.View(ctx, sku)
		if err != nil || v.Sold != s.sold || !v.Consistent() {
			t.Fatalf("%s: Redis holds %+v (%v), want sold %d", s.body, v, err, s.sold)
		}
	}

	// With no body, every product of the database: the only one here.
	if status, a := postReconcile(t, p, ""); status != http.StatusOK || len(a.SKUs) != 1 || a.Summary[admin.SKUConsistent] != 1 {
		t.Errorf("every SKU: %d %+v, want 200 and one consistent SKU", status, a)
	}
}

// TestAdminReconcileAsGatewayUser runs the endpoint on the gateway's own
// Redis and MySQL users (deploy/redis-users.acl, deploy/mysql-grants.sql):
// it repairs a SKU, and while another run holds the SKU's lease it answers
// 409 with the report, which needs the lock scripts on that lease.
func TestAdminReconcileAsGatewayUser(t *testing.T) {
	serviceRedis(t, "gateway")
	c := commonConfig(t)
	grantTestDatabase(t, c.MySQL.DSN)
	p := gatewayOnly(t, asService(t, c, "gateway"), app.GatewayConfig{})
	root := openDB(t, c.MySQL.DSN)
	sku := lostCommit(t, p, root)

	hold := holdLease(t, testenv.Redis(t), sku)
	status, a := postReconcile(t, p, `{"skus":["`+sku+`"]}`)
	if status != http.StatusConflict || a.Error.Code != "conflict" || a.Failed == nil ||
		a.Failed.SKUs[0].Outcome != admin.SKUBusy {
		t.Fatalf("while the lease is held: %d %+v, want 409 conflict with a busy report", status, a)
	}
	hold()

	status, a = postReconcile(t, p, `{"skus":["`+sku+`"]}`)
	if status != http.StatusOK || a.SKUs[0].Outcome != admin.SKURepaired {
		t.Fatalf("as surge-gateway: %d %+v, want 200 repaired", status, a)
	}
	if v, err := p.Stock.View(context.Background(), sku); err != nil || v.Sold != 2 || v.Avail != 3 {
		t.Fatalf("after the repair Redis holds %+v (%v), want sold 2 avail 3", v, err)
	}
}

// TestReconcileBusyAsServiceUsers: the reconciler's and opsctl's users
// find a SKU busy, not failed, while another run holds its lease.
func TestReconcileBusyAsServiceUsers(t *testing.T) {
	rootRedis := testenv.Redis(t)
	db := openDB(t, testenv.MySQLDSN(t))
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	sku := testenv.Unique("acl-rec-")
	testenv.CleanupSKU(t, rootRedis, sku)
	if _, err := db.SetStock(context.Background(), sku, 3, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := stock.New(rootRedis, stock.Options{}).SetStock(context.Background(), sku, 3, 0); err != nil {
		t.Fatal(err)
	}
	defer holdLease(t, rootRedis, sku)()
	for _, svc := range []string{"reconciler", "ops"} {
		c := serviceRedis(t, svc)
		rec := reconcile.New(c.ClusterClient, reconcile.StoreLedger{Store: db}, reconcile.Options{
			Locker: reconcile.NewRedisLocker(c.ClusterClient, reconcile.LockOptions{Wait: 200 * time.Millisecond}), Log: quietLog()})
		rep := rec.Run(context.Background(), false, sku)
		if rep.SKUs[0].Outcome != admin.SKUBusy {
			t.Errorf("surge-%s: %+v, want busy", svc, rep.SKUs[0])
		}
	}
}

// holdLease takes sku's reconcile lease as another run would; the
// returned func releases it (also done at cleanup).
func holdLease(t *testing.T, rdb *redis.ClusterClient, sku string) func() {
	t.Helper()
	release, err := reconcile.NewRedisLocker(rdb, reconcile.LockOptions{}).Lock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return release
}
