package preflight

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/pkg/queue"
	"surge/pkg/redisnode"
	"surge/pkg/store"
)

// opsRedis returns the preflight's Redis options as surge-ops, the user
// operators run it as; it skips (fails under CI) before deploy/users.sh.
func opsRedis(t *testing.T) RedisOptions {
	t.Helper()
	testenv.Redis(t)
	pw := os.Getenv("SURGE_OPS_PASSWORD")
	if pw == "" {
		pw = "surge-ops-local"
	}
	opts := RedisOptions{Seeds: testenv.RedisAddrs(), Username: "surge-ops", Password: pw}
	c := redis.NewClient(&redis.Options{Addr: opts.Seeds[0], Username: opts.Username, Password: pw})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		msg := fmt.Sprintf("surge-ops cannot connect (%v): run deploy/users.sh apply", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return opts
}

// rabbitTopology declares a topology on unique names, deleted at cleanup.
func rabbitTopology(t *testing.T) (string, queue.Topology) {
	t.Helper()
	url := testenv.AMQPURL(t)
	p := testenv.Unique("t.pf.")
	topo := queue.NewTopology(queue.Topology{Exchange: p + "orders", Queue: p + "orders.created", DeadExchange: p + "orders.dlx",
		DeadQueue: p + "orders.dead", RetryExchange: p + "orders.retry", RetryDelays: []time.Duration{time.Second}})
	withAMQP(t, url, topo.Declare)
	t.Cleanup(func() { withAMQP(t, url, topo.Delete) })
	return url, topo
}

func withAMQP(t *testing.T, url string, fn func(*amqp.Channel) error) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := fn(ch); err != nil {
		t.Fatal(err)
	}
}

func migratedDSN(t *testing.T) string {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	db, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestPreflightPassesOnLocalDeployment runs the whole checklist against
// the local engines as surge-ops: nothing fails.
func TestPreflightPassesOnLocalDeployment(t *testing.T) {
	url, topo := rabbitTopology(t)
	rep := Run(context.Background(), Options{Redis: opsRedis(t), Rabbit: RabbitOptions{URL: url, Topology: topo},
		MySQLDSN: migratedDSN(t)})
	if !rep.OK {
		t.Fatalf("preflight failed on %v: %+v", rep.Failed(), rep.Results)
	}
	for _, item := range []string{ItemRedisReachable, ItemClusterState, ItemMastersReplicas, ItemAuth, ItemServiceUsers,
		ItemPersistence, ItemMaxMemory, ItemQueues, ItemSchema} {
		if r, _ := rep.Result(item); r.Status != Pass {
			t.Errorf("%s: %+v, want pass", item, r)
		}
	}
}

// TestPreflightOnDegradedPrivateCluster starts a private cluster, which
// passes; switches a node to allkeys-lru, which fails redis.maxmemory
// naming it; then shuts a replica down, which fails redis.masters_replicas
// naming its master. (The shared cluster is switched only by opsctl's
// test, so two packages never flip the same node at once.)
func TestPreflightOnDegradedPrivateCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private cluster (about 13 s)")
	}
	base := privateCluster(t)
	ctx := context.Background()
	seeds := make([]string, 6)
	for i := range seeds {
		seeds[i] = fmt.Sprintf("127.0.0.1:%d", base+i)
	}
	admin := RedisOptions{Seeds: seeds, Password: testenv.RedisPassword()}
	if rep := newReport(CheckRedis(GatherRedis(ctx, admin))); !resultIs(rep, ItemMastersReplicas, Pass) ||
		!resultIs(rep, ItemMaxMemory, Pass) || !resultIs(rep, ItemClusterState, Pass) {
		t.Fatalf("fresh private cluster: %+v", rep.Results)
	}
	nodes, err := redisnode.NewProber(redisnode.Options{Password: testenv.RedisPassword()}).Topology(ctx, seeds)
	if err != nil {
		t.Fatal(err)
	}
	evicting := nodes[0].Addr
	ec := redis.NewClient(&redis.Options{Addr: evicting, Password: testenv.RedisPassword()})
	defer ec.Close()
	if err := ec.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	rep := newReport(CheckRedis(GatherRedis(ctx, admin)))
	if r, _ := rep.Result(ItemMaxMemory); rep.OK || r.Status != Fail || !strings.Contains(r.Detail, evicting+": maxmemory-policy allkeys-lru") {
		t.Fatalf("%s with %s on allkeys-lru: %+v, want fail naming the node", ItemMaxMemory, evicting, r)
	}

	var replica, master string
	addrOf := map[string]string{}
	for _, n := range nodes {
		addrOf[n.ID] = n.Addr
	}
	for _, n := range nodes {
		if !n.IsMaster() {
			replica, master = n.Addr, addrOf[n.MasterID]
			break
		}
	}
	c := redis.NewClient(&redis.Options{Addr: replica, Password: testenv.RedisPassword(), MaxRetries: -1})
	_ = c.Shutdown(ctx).Err() // the connection drops as the node exits
	_ = c.Close()

	// The master drops the replica from INFO replication once it has seen
	// the connection close, which a loaded machine may take a moment to do.
	want := "master " + master + " "
	var r Result
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rep = newReport(CheckRedis(GatherRedis(ctx, admin)))
		r, _ = rep.Result(ItemMastersReplicas)
		if strings.Contains(r.Detail, want) || time.Now().After(deadline) {
			break
		}
	}
	if rep.OK || r.Status != Fail || !strings.Contains(r.Detail, want) {
		t.Fatalf("%s after shutting down %s: %+v, want fail naming %q", ItemMastersReplicas, replica, r, want)
	}
	if r, _ := rep.Result(ItemRedisReachable); r.Status != Fail || !strings.Contains(r.Detail, replica) {
		t.Fatalf("%s: %+v, want fail naming %s", ItemRedisReachable, r, replica)
	}
}

// portsFree reports whether the six node ports from base and their
// cluster-bus ports (+10000) are free.
func portsFree(base int) bool {
	for port := base; port < base+6; port++ {
		for _, p := range []int{port, port + 10000} {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				return false
			}
			ln.Close()
		}
	}
	return true
}

func resultIs(rep Report, item string, s Status) bool {
	r, ok := rep.Result(item)
	return ok && r.Status == s
}

// privateCluster starts a cluster of its own with deploy/redis-cluster.sh
// on the first free base from 7300 (or SURGE_TEST_CLUSTER_PORT_BASE) in
// steps of 100, its cluster-bus ports included, and stops it at cleanup.
// It never touches nodes it did not start.
func privateCluster(t *testing.T) int {
	t.Helper()
	testenv.Redis(t)
	first := 7300
	if v := os.Getenv("SURGE_TEST_CLUSTER_PORT_BASE"); v != "" {
		fmt.Sscan(v, &first)
	}
	base := 0
	for b := first; b <= 7900 && base == 0; b += 100 {
		if portsFree(b) {
			base = b
		}
	}
	if base == 0 {
		msg := fmt.Sprintf("no free base for a private cluster between %d and 7900", first)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	script := func(cmd string) error {
		c := exec.Command("../../deploy/redis-cluster.sh", cmd)
		c.Env = append(os.Environ(), fmt.Sprintf("SURGE_CLUSTER_PORT_BASE=%d", base), "SURGE_VAR_DIR="+dir,
			"SURGE_REDIS_PASSWORD="+testenv.RedisPassword())
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("redis-cluster.sh %s: %w\n%s", cmd, err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := script("stop"); err != nil {
			t.Error(err)
		}
	})
	if err := script("start"); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestPreflightFailsOnClassicQueue: a dead-letter queue re-created as a
// classic queue is named, with the broker's own words.
func TestPreflightFailsOnClassicQueue(t *testing.T) {
	url, topo := rabbitTopology(t)
	withAMQP(t, url, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDelete(topo.DeadQueue, false, false, false); err != nil {
			return err
		}
		_, err := ch.QueueDeclare(topo.DeadQueue, true, false, false, false, nil)
		return err
	})
	r := CheckRabbit(GatherRabbit(context.Background(), RabbitOptions{URL: url, Topology: topo}))
	if r.Status != Fail || !strings.Contains(r.Detail, "x-queue-type") || !strings.Contains(r.Detail, topo.DeadQueue) {
		t.Fatalf("%s: %+v, want fail naming x-queue-type and %s", ItemQueues, r, topo.DeadQueue)
	}
}
