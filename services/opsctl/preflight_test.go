package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/config"
	"surge/pkg/preflight"
	"surge/pkg/queue"
	"surge/pkg/redisnode"
)

// opsEnv points opsctl at the local engines as surge-ops, with a fresh
// topology and a migrated database. It returns the administrator's Redis
// password, which SURGE_REDIS_PASSWORD no longer holds.
func opsEnv(t *testing.T) (adminPassword string) {
	t.Helper()
	testenv.Redis(t)
	adminPassword = testenv.RedisPassword()
	url, dsn := testenv.AMQPURL(t), testenv.MySQLDSN(t)
	pw := os.Getenv("SURGE_OPS_PASSWORD")
	if pw == "" {
		pw = "surge-ops-local"
	}
	probe := redis.NewClient(&redis.Options{Addr: testenv.RedisAddrs()[0], Username: "surge-ops", Password: pw})
	err := probe.Ping(context.Background()).Err()
	_ = probe.Close()
	if err != nil {
		msg := fmt.Sprintf("surge-ops cannot connect (%v): run deploy/users.sh apply", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	name := testenv.Unique("t.preflight.")
	for k, v := range map[string]string{"SURGE_REDIS_USER": "surge-ops", "SURGE_REDIS_PASSWORD": pw,
		"SURGE_AMQP_URL": url, "SURGE_MYSQL_DSN": dsn, "SURGE_AMQP_EXCHANGE": name,
		"SURGE_AMQP_QUEUE": name + ".created", "SURGE_AMQP_DEAD_QUEUE": name + ".dead",
		"SURGE_ADMIN_TOKEN": "a-token-of-32-characters-exactly"} {
		t.Setenv(k, v)
	}
	if err := app.Migrate(context.Background(), dsn, io.Discard); err != nil {
		t.Fatal(err)
	}
	var c config.Common
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	conn, err := queue.Dial(context.Background(), url, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	topo := c.AMQP.Topology()
	if err := topo.Declare(ch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_ = topo.Delete(ch)
			_ = ch.Close()
		}
	})
	return adminPassword
}

func runOpsctl(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPreflightCommand: the local deployment passes (exit 0, JSON ok);
// with a replica switched to allkeys-lru it fails (exit 1) naming the
// item on stderr and the node in the report.
func TestPreflightCommand(t *testing.T) {
	admin := opsEnv(t)
	code, out, stderr := runOpsctl("preflight", "--json", "--skip-host")
	var rep preflight.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.OK {
		t.Fatalf("preflight on the local deployment: exit %d, %v, stderr %q\n%s", code, err, stderr, out)
	}
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Item, "host.") {
			t.Fatalf("--skip-host reported %s", r.Item)
		}
	}

	if r, ok := rep.Result(preflight.ItemAdminToken); !ok || r.Status != preflight.Pass {
		t.Fatalf("admin token: %+v, %v; want it checked and passed", r, ok)
	}
	for token, want := range map[string]string{"surge-admin": `is the default "surge-admin"`, "short": "has 5 characters"} {
		t.Setenv("SURGE_ADMIN_TOKEN", token)
		code, out, stderr = runOpsctl("preflight", "--skip-host")
		if code != exitFailed || !strings.Contains(stderr, preflight.ItemAdminToken) ||
			!strings.Contains(out, "FAIL  "+preflight.ItemAdminToken) || !strings.Contains(out, want) ||
			!strings.Contains(out, "fix: SURGE_ADMIN_TOKEN=$(openssl rand -hex 32)") {
			t.Fatalf("admin token %q: exit %d, stderr %q; want exit 1 naming %s, why and the fix\n%s",
				token, code, stderr, preflight.ItemAdminToken, out)
		}
	}
	t.Setenv("SURGE_ADMIN_TOKEN", "a-token-of-32-characters-exactly")

	replica := switchReplicaToAllKeys(t, admin)
	code, out, stderr = runOpsctl("preflight")
	if code != exitFailed || !strings.Contains(stderr, preflight.ItemMaxMemory) {
		t.Fatalf("allkeys-lru on %s: exit %d, stderr %q; want exit 1 naming %s", replica, code, stderr, preflight.ItemMaxMemory)
	}
	if !strings.Contains(out, "FAIL  "+preflight.ItemMaxMemory) || !strings.Contains(out, replica+": maxmemory-policy allkeys-lru") ||
		!strings.Contains(out, "fix: CONFIG SET maxmemory") {
		t.Fatalf("report does not name the item, the node and the fix:\n%s", out)
	}
}

// switchReplicaToAllKeys sets allkeys-lru on a replica of the shared
// cluster (replicas evict nothing themselves) until cleanup.
func switchReplicaToAllKeys(t *testing.T, adminPassword string) string {
	t.Helper()
	ctx := context.Background()
	p := redisnode.NewProber(redisnode.Options{Password: adminPassword})
	defer p.Close()
	nodes, err := p.Topology(ctx, testenv.RedisAddrs())
	if err != nil {
		t.Fatal(err)
	}
	var replica string
	for _, n := range nodes {
		if !n.IsMaster() && !n.Failing() {
			replica = n.Addr
		}
	}
	c := p.Client(replica)
	old, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	restore := old["maxmemory-policy"]
	if strings.HasPrefix(restore, "allkeys-") {
		restore = "volatile-lru" // left so by a crashed run: put back what deploy/redis-cluster.sh sets
	}
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: replica, Password: adminPassword})
		defer c.Close()
		if err := c.ConfigSet(context.Background(), "maxmemory-policy", restore).Err(); err != nil {
			t.Errorf("restore maxmemory-policy on %s: %v", replica, err)
		}
	})
	return replica
}

// TestExporterCommand serves the cluster and the queues on one scrape
// until its context ends.
func TestExporterCommand(t *testing.T) {
	opsEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"exporter", "--addr", addr}, io.Discard, io.Discard) }()
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for body == "" {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{`surge_redis_node_up{node="`, "surge_redis_cluster_state_ok", "surge_redis_used_memory_bytes",
		"surge_redis_replication_lag_bytes", `surge_queue_messages{queue="` + os.Getenv("SURGE_AMQP_QUEUE") + `"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("exporter scrape lacks %s", want)
		}
	}
	if strings.Contains(body, "surge_reservations_total") {
		t.Error("the exporter serves the services' counters: its scrape must hold the cluster and queues only")
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exporter exit %d after its context ended", code)
	}
}
