package preflight

import (
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/redisnode"
)

// Replies captured from a local cluster (port base 7300): CLUSTER NODES
// healthy and after the replica 7303 was shut down, and the masters' INFO
// replication at the same moments.
const (
	healthyNodes = `dbfe126dfd140fcb1a01771bdca2ae829956fc88 127.0.0.1:7301@17301 master - 0 1795943930000 2 connected 5461-10922
48149e9c323e9db7ed38d8fae960b32cd7816c34 127.0.0.1:7303@17303 slave 157ca7c4890650682117b9764bdd1d403220f8c7 0 1795943931942 1 connected
157ca7c4890650682117b9764bdd1d403220f8c7 127.0.0.1:7300@17300 myself,master - 0 1795943931000 1 connected 0-5460
0aa40a119ffe4b315c4064d34235c9e542f6e401 127.0.0.1:7302@17302 master - 0 1795943931000 3 connected 10923-16383
a75ffefe7dc03032698159a72a68cd8ff121854f 127.0.0.1:7304@17304 slave dbfe126dfd140fcb1a01771bdca2ae829956fc88 0 1795943930535 2 connected
b9f98896169710e4dde50441dfffeda71f502258 127.0.0.1:7305@17305 slave 0aa40a119ffe4b315c4064d34235c9e542f6e401 0 1795943931038 3 connected
`
	replicaLostNodes = `dbfe126dfd140fcb1a01771bdca2ae829956fc88 127.0.0.1:7301@17301 master - 0 1795943940599 2 connected 5461-10922
48149e9c323e9db7ed38d8fae960b32cd7816c34 127.0.0.1:7303@17303 slave,fail 157ca7c4890650682117b9764bdd1d403220f8c7 1795943933957 1795943931942 1 disconnected
157ca7c4890650682117b9764bdd1d403220f8c7 127.0.0.1:7300@17300 myself,master - 0 1795943939000 1 connected 0-5460
0aa40a119ffe4b315c4064d34235c9e542f6e401 127.0.0.1:7302@17302 master - 0 1795943940000 3 connected 10923-16383
a75ffefe7dc03032698159a72a68cd8ff121854f 127.0.0.1:7304@17304 slave dbfe126dfd140fcb1a01771bdca2ae829956fc88 0 1795943939000 2 connected
b9f98896169710e4dde50441dfffeda71f502258 127.0.0.1:7305@17305 slave 0aa40a119ffe4b315c4064d34235c9e542f6e401 0 1795943939993 3 connected
`
	replicationOK   = "role:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=%s,state=online,offset=518,lag=0\r\nmaster_repl_offset:518\r\n"
	replicationLost = "role:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_repl_offset:518\r\n"
	replicaInfo     = "role:slave\r\nmaster_link_status:up\r\n"
)

// localConfig is what CONFIG GET answered on those nodes.
var localConfig = map[string]string{
	"appendonly": "yes", "appendfsync": "everysec", "maxmemory": "268435456", "maxmemory-policy": "noeviction",
	"min-replicas-to-write": "0", "min-replicas-max-lag": "10", "maxclients": "10000",
}

// facts builds the cluster's facts from the captured replies; edit
// changes one node's snapshot.
func facts(t *testing.T, nodesReply string, lost bool, edit func(addr string, s *redisnode.Snapshot)) RedisFacts {
	t.Helper()
	nodes, err := redisnode.ParseClusterNodes(nodesReply)
	if err != nil {
		t.Fatal(err)
	}
	replicaOf := map[string]string{"127.0.0.1:7300": "7303", "127.0.0.1:7301": "7304", "127.0.0.1:7302": "7305"}
	f := RedisFacts{Nodes: nodes, Anonymous: map[string]error{}}
	for _, n := range nodes {
		info := replicaInfo
		if port, ok := replicaOf[n.Addr]; ok {
			info = strings.Replace(replicationOK, "%s", port, 1)
			if lost && n.Addr == "127.0.0.1:7300" {
				info = replicationLost
			}
		}
		cfg := map[string]string{}
		for k, v := range localConfig {
			cfg[k] = v
		}
		s := redisnode.Snapshot{Addr: n.Addr, Info: redisnode.ParseInfo(info + "used_memory:3000000\r\nmaxmemory:268435456\r\n"),
			Cluster: map[string]string{"cluster_state": "ok"}, Config: cfg}
		if edit != nil {
			edit(n.Addr, &s)
		}
		f.Snapshots = append(f.Snapshots, s)
		f.Anonymous[n.Addr] = errors.New("NOAUTH HELLO must be called with the client already authenticated")
		for _, u := range DefaultServiceUsers {
			f.DryRuns = append(f.DryRuns, DryRun{Addr: n.Addr, User: u, Command: "FLUSHALL",
				Reply: "This user has no permissions to run the 'flushall' command"})
		}
	}
	return f
}

func results(rs []Result) map[string]Result {
	out := map[string]Result{}
	for _, r := range rs {
		out[r.Item] = r
	}
	return out
}

func TestHealthyClusterPasses(t *testing.T) {
	got := results(CheckRedis(facts(t, healthyNodes, false, nil)))
	for _, item := range []string{ItemRedisReachable, ItemClusterState, ItemMastersReplicas, ItemAuth,
		ItemServiceUsers, ItemPersistence, ItemMaxMemory} {
		if got[item].Status != Pass {
			t.Errorf("%s: %+v, want pass", item, got[item])
		}
	}
	if got[ItemMinReplicas].Status != Warn {
		t.Errorf("min-replicas-to-write 0: %+v, want a warning to consider it", got[ItemMinReplicas])
	}
}

func TestFailuresNameTheItemAndNode(t *testing.T) {
	cases := []struct {
		name  string
		nodes string
		lost  bool
		edit  func(addr string, s *redisnode.Snapshot)
		fx    func(f *RedisFacts)
		item  string
		want  string
	}{
		{name: "replica lost", nodes: replicaLostNodes, lost: true,
			item: ItemMastersReplicas, want: "master 127.0.0.1:7300 (slots 0-5460) has no replica in sync"},
		{name: "allkeys-lru", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) {
			if addr == "127.0.0.1:7302" {
				s.Config["maxmemory-policy"] = "allkeys-lru"
			}
		}, item: ItemMaxMemory, want: "127.0.0.1:7302: maxmemory-policy allkeys-lru would evict stock keys"},
		{name: "volatile-lru", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) {
			if addr == "127.0.0.1:7303" {
				s.Config["maxmemory-policy"] = "volatile-lru"
			}
		}, item: ItemMaxMemory, want: "127.0.0.1:7303: maxmemory-policy volatile-lru would evict order states"},
		{name: "no maxmemory", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) { s.Config["maxmemory"] = "0" },
			item: ItemMaxMemory, want: "maxmemory is not set"},
		{name: "no AOF", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) {
			if addr == "127.0.0.1:7304" {
				s.Config["appendonly"] = "no"
			}
		}, item: ItemPersistence, want: "127.0.0.1:7304: appendonly no"},
		{name: "cluster down", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) { s.Cluster["cluster_state"] = "fail" },
			item: ItemClusterState, want: "127.0.0.1:7301: cluster_state:fail"},
		{name: "no password", nodes: healthyNodes, fx: func(f *RedisFacts) { f.Anonymous["127.0.0.1:7305"] = nil },
			item: ItemAuth, want: "127.0.0.1:7305 answers commands without a password"},
		{name: "gateway may flush", nodes: healthyNodes, fx: func(f *RedisFacts) {
			f.DryRuns = append(f.DryRuns, DryRun{Addr: "127.0.0.1:7300", User: "surge-gateway", Command: "FLUSHALL", Reply: "OK"})
		}, item: ItemServiceUsers, want: "surge-gateway may run FLUSHALL on 127.0.0.1:7300"},
		{name: "user missing", nodes: healthyNodes, fx: func(f *RedisFacts) {
			f.DryRuns = append(f.DryRuns, DryRun{Addr: "127.0.0.1:7301", User: "surge-worker", Err: errors.New("ERR User 'surge-worker' not found")})
		}, item: ItemServiceUsers, want: "user surge-worker is missing on 127.0.0.1:7301"},
		{name: "config unreadable", nodes: healthyNodes, edit: func(addr string, s *redisnode.Snapshot) {
			s.ConfigErr = errors.New("NOPERM this user has no permissions to run the 'config|get' command")
		}, item: ItemMaxMemory, want: "cannot read CONFIG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := facts(t, c.nodes, c.lost, c.edit)
			if c.fx != nil {
				c.fx(&f)
			}
			rs := CheckRedis(f)
			r := results(rs)[c.item]
			if r.Status != Fail || !strings.Contains(r.Detail, c.want) || r.Fix == "" {
				t.Fatalf("%s: %+v, want fail containing %q with a fix", c.item, r, c.want)
			}
			if newReport(rs).OK {
				t.Fatal("report OK with a failing item")
			}
		})
	}
}

func TestHostWarnsOnly(t *testing.T) {
	f := facts(t, healthyNodes, false, func(addr string, s *redisnode.Snapshot) {
		if addr == "127.0.0.1:7300" {
			s.Config["maxclients"] = "4064"
		}
	})
	got := results(CheckHost(HostFacts{Overcommit: "0", HugePages: "[always] madvise never", NoFile: 1024}, f))
	for item, want := range map[string]string{
		ItemOvercommit: "vm.overcommit_memory = 0", ItemHugePages: "always on", ItemOpenFiles: "127.0.0.1:7300: maxclients 4064",
	} {
		if got[item].Status != Warn || !strings.Contains(got[item].Detail, want) {
			t.Errorf("%s: %+v, want a warning containing %q", item, got[item], want)
		}
	}
	ok := results(CheckHost(HostFacts{Overcommit: "1", HugePages: "always [madvise] never", NoFile: 65535}, facts(t, healthyNodes, false, nil)))
	for _, item := range []string{ItemOvercommit, ItemHugePages, ItemOpenFiles} {
		if ok[item].Status != Pass {
			t.Errorf("%s: %+v, want pass", item, ok[item])
		}
	}
}

func TestRabbitAndSchemaVerdicts(t *testing.T) {
	depth := map[string][2]int{"orders.created": {0, 2}, "orders.dead": {0, 0}}
	cases := []struct {
		f    RabbitFacts
		want Status
		text string
	}{
		{RabbitFacts{Depth: depth, Work: "orders.created", Dead: "orders.dead"}, Pass, "durable and quorum"},
		{RabbitFacts{Missing: []string{"queue orders.dead"}}, Fail, "missing: queue orders.dead"},
		{RabbitFacts{Mismatch: &amqp.Error{Code: amqp.PreconditionFailed,
			Reason: "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders.dead' in vhost '/': received the value 'quorum' of type 'longstr' but current is none"}},
			Fail, "inequivalent arg 'x-queue-type'"},
		{RabbitFacts{Depth: map[string][2]int{"orders.created": {0, 2}, "orders.dead": {4, 0}}, Work: "orders.created", Dead: "orders.dead"},
			Warn, "4 dead letter(s)"},
		{RabbitFacts{Err: errors.New("dial tcp: connection refused")}, Fail, "unreachable"},
	}
	for _, c := range cases {
		if r := CheckRabbit(c.f); r.Status != c.want || !strings.Contains(r.Detail, c.text) {
			t.Errorf("%+v -> %+v, want %s containing %q", c.f, r, c.want, c.text)
		}
	}
	if r := CheckSchema(SchemaFacts{Current: 2, Latest: 3}); r.Status != Fail || r.Fix != "opsctl migrate" {
		t.Errorf("schema behind: %+v", r)
	}
	if r := CheckSchema(SchemaFacts{Current: 3, Latest: 3}); r.Status != Pass {
		t.Errorf("schema current: %+v", r)
	}
}

func TestCheckAdminToken(t *testing.T) {
	for token, want := range map[string]Status{"surge-admin": Fail, "": Fail, "fifteen-chars!!": Fail,
		"0123456789abcdef": Pass, "a-long-random-hex-token-0123456789": Pass,
		"REPLACE-ME-admin-token-of-32-random-characters": Fail} {
		r := CheckAdminToken(token)
		if r.Item != ItemAdminToken || r.Status != want || (want == Fail && (r.Fix == "" || r.Detail == "")) {
			t.Errorf("token %q: %+v, want %s with a detail and a fix", token, r, want)
		}
	}
}
