package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"

	"surge/internal/testenv"
	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/redisnode"
)

// gatherOne registers c alone and returns its families by name.
func gatherOne(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// byLabel maps a family's series by the value of label (or "" without).
func byLabel(f *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		out[key] = value(m)
	}
	return out
}

// TestClusterCollectorOnLiveCluster scrapes the local cluster: six nodes
// up, three masters each with a replica in sync, memory and ops read.
func TestClusterCollectorOnLiveCluster(t *testing.T) {
	testenv.Redis(t)
	c := NewClusterCollector(ClusterOptions{Seeds: testenv.RedisAddrs(), Password: testenv.RedisPassword()})
	defer c.Close()
	fams := gatherOne(t, c)
	up := byLabel(fams["surge_redis_node_up"], "node")
	if len(up) != 6 {
		t.Fatalf("node_up for %d nodes, want 6: %v", len(up), up)
	}
	for node, v := range up {
		if v != 1 {
			t.Errorf("node %s: up %v", node, v)
		}
	}
	for _, name := range []string{"surge_redis_cluster_state_ok", "surge_redis_used_memory_bytes",
		"surge_redis_maxmemory_bytes", "surge_redis_instantaneous_ops_per_sec", "surge_redis_evicted_keys_total"} {
		if got := len(byLabel(fams[name], "node")); got != 6 {
			t.Errorf("%s has %d nodes, want 6", name, got)
		}
	}
	for node, v := range byLabel(fams["surge_redis_used_memory_bytes"], "node") {
		if v <= 0 {
			t.Errorf("node %s: used_memory %v", node, v)
		}
	}
	if got := len(byLabel(fams["surge_redis_replication_lag_bytes"], "node")); got != 3 {
		t.Errorf("replication lag for %d replicas, want 3", got)
	}
	if m := byLabel(fams["surge_redis_cluster_masters"], "")[""]; m != 3 {
		t.Errorf("cluster_masters %v, want 3", m)
	}
	if u := byLabel(fams["surge_redis_cluster_masters_without_replica"], "")[""]; u != 0 {
		t.Errorf("masters_without_replica %v, want 0", u)
	}
}

// TestClusterCollectorUnreachable: no seed answers, every seed reads down.
func TestClusterCollectorUnreachable(t *testing.T) {
	c := NewClusterCollector(ClusterOptions{Seeds: []string{"127.0.0.1:1", "127.0.0.1:2"}, Timeout: time.Second})
	defer c.Close()
	up := byLabel(gatherOne(t, c)["surge_redis_node_up"], "node")
	if len(up) != 2 || up["127.0.0.1:1"] != 0 || up["127.0.0.1:2"] != 0 {
		t.Fatalf("node_up %v, want both seeds at 0", up)
	}
}

// TestUnreplicatedMasterCounted feeds collectReplication the topology and
// INFO captured when a replica had been shut down.
func TestUnreplicatedMasterCounted(t *testing.T) {
	nodes, err := redisnode.ParseClusterNodes(replicaLost)
	if err != nil {
		t.Fatal(err)
	}
	withReplica := redisnode.ParseInfo("role:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7304,state=online,offset=90,lag=1\r\nmaster_repl_offset:100\r\n")
	snaps := map[string]redisnode.Snapshot{
		"127.0.0.1:7300": {Addr: "127.0.0.1:7300", Info: redisnode.ParseInfo("role:master\r\nconnected_slaves:0\r\nmaster_repl_offset:100\r\n")},
		"127.0.0.1:7301": {Addr: "127.0.0.1:7301", Info: withReplica},
		"127.0.0.1:7302": {Addr: "127.0.0.1:7302", Info: withReplica},
	}
	ch := make(chan prometheus.Metric, 16)
	collectReplication(ch, nodes, snaps)
	close(ch)
	seen := 0
	for m := range ch {
		seen++
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		if m.Desc() == descUnreplicated && pb.GetGauge().GetValue() != 1 {
			t.Fatalf("masters_without_replica %v, want 1 (7300 lost 7303)", pb.GetGauge().GetValue())
		}
		if m.Desc() == descLagBytes && pb.GetGauge().GetValue() != 10 {
			t.Fatalf("lag %v bytes, want 10", pb.GetGauge().GetValue())
		}
	}
	// Two masters with one replica each (lag bytes and seconds), masters,
	// masters without replica.
	if seen != 6 {
		t.Fatalf("%d metrics collected, want 6", seen)
	}
}

const replicaLost = `dbfe126dfd140fcb1a01771bdca2ae829956fc88 127.0.0.1:7301@17301 master - 0 1795943940599 2 connected 5461-10922
48149e9c323e9db7ed38d8fae960b32cd7816c34 127.0.0.1:7303@17303 slave,fail 157ca7c4890650682117b9764bdd1d403220f8c7 1795943933957 1795943931942 1 disconnected
157ca7c4890650682117b9764bdd1d403220f8c7 127.0.0.1:7300@17300 myself,master - 0 1795943939000 1 connected 0-5460
0aa40a119ffe4b315c4064d34235c9e542f6e401 127.0.0.1:7302@17302 master - 0 1795943940000 3 connected 10923-16383
a75ffefe7dc03032698159a72a68cd8ff121854f 127.0.0.1:7304@17304 slave dbfe126dfd140fcb1a01771bdca2ae829956fc88 0 1795943939000 2 connected
b9f98896169710e4dde50441dfffeda71f502258 127.0.0.1:7305@17305 slave 0aa40a119ffe4b315c4064d34235c9e542f6e401 0 1795943939993 3 connected
`

// TestQueueCollectorAndPublishResults publishes three orders to a fresh
// topology: they are counted confirmed and the work queue reads three
// deep; an unroutable publish counts as returned, with the broker's real
// answer; a missing queue reads down.
func TestQueueCollectorAndPublishResults(t *testing.T) {
	url := testenv.AMQPURL(t)
	ctx := context.Background()
	conn, err := queue.Dial(ctx, url, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := testenv.Unique("t.metrics.")
	topo := queue.NewTopology(queue.Topology{Exchange: p + "orders", Queue: p + "orders.created", DeadExchange: p + "orders.dlx",
		DeadQueue: p + "orders.dead", RetryExchange: p + "orders.retry", RetryDelays: []time.Duration{time.Second}})
	withChannel(t, conn, func(ch *amqp.Channel) error { return topo.Declare(ch) })
	t.Cleanup(func() { withChannel(t, conn, func(ch *amqp.Channel) error { return topo.Delete(ch) }) })

	pub, err := queue.NewPublisher(conn, topo, queue.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	confirmed := sample(t, "surge_publish_total", map[string]string{"result": PublishConfirmed})
	for i := range 3 {
		o := order.Order{ID: order.IDFor("c", testenv.Unique("k"), 0), SKU: "sku-1", Qty: 1 + i, CustomerID: "c"}
		if err := observedPublish(ctx, pub, o); err != nil {
			t.Fatal(err)
		}
	}
	if got := sample(t, "surge_publish_total", map[string]string{"result": PublishConfirmed}); got != confirmed+3 {
		t.Fatalf("confirmed %v -> %v, want +3", confirmed, got)
	}
	// A topology whose exchange exists but routes nowhere: the broker
	// returns the mandatory message.
	lost := topo
	lost.RoutingKey = "nowhere"
	stray, err := queue.NewPublisher(conn, lost, queue.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	returned := sample(t, "surge_publish_total", map[string]string{"result": PublishReturned})
	o := order.Order{ID: order.IDFor("c", testenv.Unique("k"), 0), SKU: "sku-1", Qty: 1, CustomerID: "c"}
	if err := observedPublish(ctx, stray, o); err == nil {
		t.Fatal("an unroutable publish succeeded")
	}
	if got := sample(t, "surge_publish_total", map[string]string{"result": PublishReturned}); got != returned+1 {
		t.Fatalf("returned %v -> %v, want +1", returned, got)
	}

	fams := gatherOne(t, NewQueueCollector(conn, topo.Queue, topo.DeadQueue, p+"missing"))
	up, msgs := byLabel(fams["surge_queue_up"], "queue"), byLabel(fams["surge_queue_messages"], "queue")
	if up[topo.Queue] != 1 || msgs[topo.Queue] != 3 || msgs[topo.DeadQueue] != 0 || up[p+"missing"] != 0 {
		t.Fatalf("queue up %v messages %v; want the work queue 3 deep, the dead queue empty, the missing one down", up, msgs)
	}
}

// observedPublish publishes o on pub and tells a GatewayObserver, as the
// gateway does.
func observedPublish(ctx context.Context, pub *queue.Publisher, o order.Order) error {
	var obs GatewayObserver
	start := time.Now()
	pctx := obs.Begin(ctx, gateway.StepPublish, o)
	err := pub.Publish(pctx, o)
	obs.End(pctx, gateway.StepPublish, o, gateway.Result{Err: err, Took: time.Since(start)})
	return err
}

func withChannel(t *testing.T, conn *queue.Conn, f func(*amqp.Channel) error) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := f(ch); err != nil {
		t.Fatal(err)
	}
}
