package app_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/app"
	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/idem"
	"surge/pkg/keys"
	"surge/pkg/order"
	"surge/pkg/ratelimit"
	"surge/pkg/stock"
)

// The service users of deploy/users.sh and their passwords (the same
// variables and local defaults the script reads).
var services = []string{"gateway", "worker", "reconciler", "ops"}

func servicePassword(svc string) string {
	if pw := os.Getenv("SURGE_" + strings.ToUpper(svc) + "_PASSWORD"); pw != "" {
		return pw
	}
	return "surge-" + svc + "-local"
}

// serviceRedis connects to the cluster as svc's ACL user; it skips (fails
// under CI) when deploy/users.sh has not created the user.
func serviceRedis(t *testing.T, svc string) *cluster.Client {
	t.Helper()
	testenv.Redis(t)
	c := cluster.New(cluster.Options{Addrs: testenv.RedisAddrs(), Username: "surge-" + svc, Password: servicePassword(svc)})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		msg := "Redis user surge-" + svc + " cannot connect (" + err.Error() + "); run deploy/users.sh apply"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return c
}

// TestServiceUsersRefusedOutsideGrant: every service user is refused the
// commands that could wipe or reconfigure the cluster, on every master.
func TestServiceUsersRefusedOutsideGrant(t *testing.T) {
	ctx := context.Background()
	refused := [][]any{
		{"flushall"}, {"flushdb"}, {"keys", "*"},
		{"config", "set", "maxmemory-policy", "allkeys-lru"}, {"shutdown", "nosave"},
		{"acl", "setuser", "intruder", "on", ">x", "~*", "+@all"}, {"set", "not-a-surge-key", "1"},
	}
	for _, svc := range services {
		c := serviceRedis(t, svc)
		cmds := refused
		if svc != "ops" {
			cmds = append(cmds, []any{"config", "get", "maxmemory"}, []any{"info"})
		}
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			for _, args := range cmds {
				err := n.Do(ctx, args...).Err()
				if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
					t.Errorf("surge-%s on %s: %v answered %v, want NOPERM", svc, n.Options().Addr, args, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// DEBUG is disabled for everyone on these nodes, so its refusal proves
	// nothing about the grant: ask the ACL itself.
	err := testenv.Redis(t).ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		for _, svc := range services {
			got, err := n.Do(ctx, "acl", "dryrun", "surge-"+svc, "debug", "sleep", "0").Text()
			if err != nil || !strings.Contains(got, "no permissions") {
				t.Errorf("ACL DRYRUN surge-%s DEBUG on %s: %q %v, want no permissions", svc, n.Options().Addr, got, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestServiceUsersRunTheirScripts runs, as each user, the real scripts and
// commands its service sends, so a grant missing an inner command of a
// Lua script fails here and not in production.
func TestServiceUsersRunTheirScripts(t *testing.T) {
	ctx := context.Background()
	admin := testenv.Redis(t)
	sku := testenv.Unique("acl-")
	testenv.CleanupSKU(t, admin, sku)
	gw, wk, rc, ops := serviceRedis(t, "gateway"), serviceRedis(t, "worker"), serviceRedis(t, "reconciler"), serviceRedis(t, "ops")
	for _, c := range []*cluster.Client{gw, wk, rc, ops} {
		if err := stock.LoadScripts(ctx, c.ClusterClient); err != nil {
			t.Fatalf("load scripts: %v", err)
		}
	}

	// Operations load the stock and read it back.
	if _, err := stock.New(ops, stock.Options{}).SetStock(ctx, sku, 10, 0); err != nil {
		t.Fatalf("ops load: %v", err)
	}
	// The gateway claims, reserves, releases, limits and loads (admin API).
	gs := stock.New(gw, stock.Options{})
	o := order.Order{SKU: sku, Qty: 2, CustomerID: "c1"}
	forgotten, err := idem.New(gw, time.Minute).Claim(ctx, o, testenv.Unique("k"))
	if err != nil {
		t.Fatalf("gateway claim: %v", err)
	}
	if ok, err := idem.New(gw, time.Minute).Forget(ctx, forgotten); !ok || err != nil {
		t.Fatalf("gateway forget: %v %v", ok, err)
	}
	claim, err := idem.New(gw, time.Minute).Limited(1, 2).Claim(ctx, o, testenv.Unique("k"))
	if err != nil {
		t.Fatalf("gateway claim: %v", err)
	}
	o.ID = claim.OrderID
	t.Cleanup(func() { admin.Del(ctx, keys.Idem(o.ID), keys.CustomerRate(o.CustomerID)) })
	for name, c := range map[string]*cluster.Client{"gateway": gw, "reconciler": rc, "ops": ops} {
		if _, err := idem.New(c, time.Minute).Lookup(ctx, o.ID); err != nil {
			t.Fatalf("%s lookup: %v", name, err)
		}
	}
	if _, err := gs.Reserve(ctx, o); err != nil {
		t.Fatalf("gateway reserve: %v", err)
	}
	o2 := order.Order{ID: order.IDFor("c2", "k1", 0), SKU: sku, Qty: 1, CustomerID: "c2"}
	r2, err := gs.Reserve(ctx, o2)
	if err != nil {
		t.Fatalf("gateway reserve: %v", err)
	}
	if _, err := gs.Undo(ctx, sku, o2.ID, r2.Nonce); err != nil {
		t.Fatalf("gateway undo: %v", err)
	}
	subject := testenv.Unique("acl-")
	t.Cleanup(func() { admin.Del(ctx, keys.RateLimit("ip:"+subject)) })
	if _, _, err := ratelimit.New(gw, "ip:", 1, 1).Allow(ctx, subject); err != nil {
		t.Fatalf("gateway rate limit: %v", err)
	}
	if _, err := gs.SetStock(ctx, sku, 12, 0); err != nil {
		t.Fatalf("gateway admin load: %v", err)
	}
	// The worker commits; the reconciler reads, walks keys and repairs.
	if _, err := stock.New(wk, stock.Options{}).Commit(ctx, sku, o.ID, o.Qty); err != nil {
		t.Fatalf("worker commit: %v", err)
	}
	if _, err := stock.New(rc, stock.Options{}).SetStock(ctx, sku, 12, 2); err != nil {
		t.Fatalf("reconciler load: %v", err)
	}
	for _, c := range []*cluster.Client{rc, ops} {
		if err := scanFinds(ctx, c, keys.Stock(sku)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := stock.New(ops, stock.Options{}).View(ctx, sku)
	if err != nil {
		t.Fatalf("ops view: %v", err)
	}
	if v.Stock != 12 || v.Sold != 2 || v.Avail != 10 || !v.Consistent() {
		t.Fatalf("after the users' scripts: %+v, want stock 12 sold 2 avail 10", v)
	}
}

// scanFinds walks every master with SCAN (never KEYS) and looks for key.
func scanFinds(ctx context.Context, c *cluster.Client, key string) error {
	var found atomic.Bool // ForEachMaster scans the masters concurrently
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		it := n.Scan(ctx, 0, keys.SKUPattern, 1000).Iterator()
		for it.Next(ctx) {
			if it.Val() == key {
				found.Store(true)
			}
		}
		return it.Err()
	})
	if err != nil {
		return err
	}
	if !found.Load() {
		return errors.New("SCAN did not find " + key)
	}
	return nil
}

// TestPipelineAsServiceUsers runs the order path with the gateway and the
// worker on their own Redis and MySQL users, the MySQL grants being those
// of deploy/mysql-grants.sql on the test's database.
func TestPipelineAsServiceUsers(t *testing.T) {
	serviceRedis(t, "gateway")
	c := commonConfig(t)
	grantTestDatabase(t, c.MySQL.DSN)
	cg, cw := asService(t, c, "gateway"), asService(t, c, "worker")
	url, g := startGatewayConfig(t, app.GatewayConfig{Common: cg, AdminToken: "test-token"})
	startWorker(t, cw)
	p := &pipeline{URL: url, Admin: apptest.AdminURL(g), Token: "test-token", Stock: g.Stock, Cfg: c, DB: openDB(t, c.MySQL.DSN)}
	sku := testenv.Unique("users-")
	p.loadStock(t, sku, 3)
	hc := newClient(t)
	ids := map[string]bool{}
	for i := range 4 {
		a := post(t, hc, url, "k", orderBody(sku, 1, sku+"-c"+itoa(i)))
		switch {
		case a.Status == http.StatusAccepted:
			ids[a.OrderID] = true
		case a.Status != http.StatusConflict:
			t.Fatalf("order %d as surge-gateway: %d %+v", i, a.Status, a.Error)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("%d orders accepted, want 3", len(ids))
	}
	testkit.WaitFor(t, "3 invoices written by surge-worker", 30*time.Second, func() (bool, error) {
		n, err := p.DB.InvoiceCount(context.Background(), sku)
		return n == 3, err
	})
	for id := range ids {
		resp, err := hc.Get(url + "/v1/orders/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Status string }
		err = jsonDecode(resp.Body, &v)
		resp.Body.Close()
		if err != nil || v.Status != "invoiced" {
			t.Fatalf("order %s as seen by surge-gateway: %q (err %v), want invoiced", id, v.Status, err)
		}
	}
}

// asService returns c with svc's Redis user and MySQL user (same
// database). RabbitMQ stays on c's user: the tests' unique exchange names
// are outside the service users' permissions by design.
func asService(t *testing.T, c config.Common, svc string) config.Common {
	t.Helper()
	c.Redis.User, c.Redis.Password = "surge-"+svc, servicePassword(svc)
	dsn, err := mysql.ParseDSN(c.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	dsn.User, dsn.Passwd = "surge-"+svc, servicePassword(svc)
	c.MySQL.DSN = dsn.FormatDSN()
	return c
}

// grantTestDatabase applies deploy/mysql-grants.sql to the test database
// and revokes it at cleanup.
func grantTestDatabase(t *testing.T, dsn string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host := os.Getenv("SURGE_MYSQL_USER_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	raw, err := os.ReadFile("../../deploy/mysql-grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var users int
	if err := db.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'surge-%' AND Host = ?", host).Scan(&users); err != nil || users < len(services) {
		msg := "MySQL service users missing (run deploy/users.sh apply)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg, err)
		}
		t.Skip(msg, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "GRANT ") {
			continue
		}
		stmt := strings.NewReplacer("{db}", cfg.DBName, "{host}", host).Replace(line)
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		rows, err := db.Query(`SELECT CONCAT('REVOKE ALL PRIVILEGES ON `+"`"+`', Db, '`+"`"+`.`+"`"+`', Table_name, '`+"`"+` FROM ''', User, '''@''', Host, '''')
			FROM mysql.tables_priv WHERE Db = ? UNION ALL
			SELECT CONCAT('REVOKE ALL PRIVILEGES ON `+"`"+`', Db, '`+"`"+`.* FROM ''', User, '''@''', Host, '''')
			FROM mysql.db WHERE Db = ?`, cfg.DBName, cfg.DBName)
		if err != nil {
			t.Errorf("list grants to revoke: %v", err)
			return
		}
		var stmts []string
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			stmts = append(stmts, s)
		}
		rows.Close()
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
}

// TestRabbitMQServiceUsers: the service users reach the order names and
// nothing else; the reconciler reaches nothing.
func TestRabbitMQServiceUsers(t *testing.T) {
	testenv.AMQPURL(t)
	dial := func(svc string) *amqp.Channel {
		conn, err := amqp.DialConfig("amqp://surge-"+svc+":"+servicePassword(svc)+"@127.0.0.1:5672/",
			amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
		if err != nil {
			msg := "RabbitMQ user surge-" + svc + ": " + err.Error() + " (run deploy/users.sh apply)"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	ours := testenv.Unique("orders.t-acl-")
	ch := dial("gateway")
	if _, err := ch.QueueDeclare(ours, false, true, false, false, nil); err != nil {
		t.Fatalf("surge-gateway declaring %s: %v", ours, err)
	}
	if _, err := ch.QueueDelete(ours, false, false, false); err != nil {
		t.Fatalf("surge-gateway deleting %s: %v", ours, err)
	}
	for _, svc := range []string{"gateway", "worker", "reconciler"} {
		other := testenv.Unique("t-acl-other-")
		if _, err := dial(svc).QueueDeclare(other, false, true, false, false, nil); !accessRefused(err) {
			t.Errorf("surge-%s declaring %s: %v, want ACCESS_REFUSED", svc, other, err)
		}
	}
	if _, err := dial("reconciler").QueueDeclare(ours, false, true, false, false, nil); !accessRefused(err) {
		t.Errorf("surge-reconciler declaring %s: %v, want ACCESS_REFUSED", ours, err)
	}
}

func accessRefused(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.AccessRefused
}
