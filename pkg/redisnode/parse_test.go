package redisnode

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"surge/internal/testenv"
)

// Replies captured from a local cluster (deploy/redis-cluster.sh on port
// base 7300), healthy and then with the replica 7303 shut down.
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
	masterReplication = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n" +
		"slave0:ip=127.0.0.1,port=7303,state=online,offset=518,lag=0\r\n" +
		"master_failover_state:no-failover\r\nmaster_replid:fe6a40ff6c4a4e599844e68672bba2b3a714af37\r\n" +
		"master_repl_offset:618\r\nsecond_repl_offset:-1\r\n"
)

func TestParseClusterNodes(t *testing.T) {
	nodes, err := ParseClusterNodes(healthyNodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(nodes))
	}
	want := Node{ID: "157ca7c4890650682117b9764bdd1d403220f8c7", Addr: "127.0.0.1:7300",
		Flags: []string{"myself", "master"}, Connected: true, Slots: []string{"0-5460"}}
	if d := cmp.Diff(want, nodes[2]); d != "" {
		t.Fatalf("node 7300 (-want +got):\n%s", d)
	}
	if r := nodes[1]; r.IsMaster() || r.MasterID != want.ID || r.Failing() {
		t.Fatalf("replica 7303 parsed as %+v", r)
	}
	lost, err := ParseClusterNodes(replicaLostNodes)
	if err != nil {
		t.Fatal(err)
	}
	if r := lost[1]; !r.Failing() || r.Connected {
		t.Fatalf("replica 7303 after its shutdown parsed as %+v, want failing and disconnected", r)
	}
	if _, err := ParseClusterNodes("garbage"); err == nil {
		t.Fatal("a malformed reply must be an error")
	}
}

func TestReplicasFromMasterInfo(t *testing.T) {
	info := ParseInfo(masterReplication)
	want := []Replica{{Addr: "127.0.0.1:7303", State: "online", LagBytes: 100, LagSeconds: 0}}
	if d := cmp.Diff(want, Replicas(info)); d != "" {
		t.Fatalf("replicas (-want +got):\n%s", d)
	}
	if v, ok := Float(info, "connected_slaves"); !ok || v != 1 {
		t.Fatalf("connected_slaves = %v %v", v, ok)
	}
}

// TestProbeLiveCluster reads the local cluster: six nodes, three masters
// with slots, every node answering with INFO and CLUSTER INFO.
func TestProbeLiveCluster(t *testing.T) {
	testenv.Redis(t)
	p := NewProber(Options{Password: testenv.RedisPassword()})
	defer p.Close()
	ctx := context.Background()
	nodes, err := p.Topology(ctx, append([]string{"127.0.0.1:1"}, testenv.RedisAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	masters := 0
	for _, n := range nodes {
		if n.IsMaster() && len(n.Slots) > 0 {
			masters++
		}
	}
	if len(nodes) != 6 || masters != 3 {
		t.Fatalf("%d nodes, %d masters with slots; want 6 and 3", len(nodes), masters)
	}
	for _, s := range p.SnapshotAll(ctx, Addrs(nodes), "maxmemory-policy") {
		if s.Err != nil || s.ConfigErr != nil {
			t.Fatal(s.Err, s.ConfigErr)
		}
		if s.Cluster["cluster_state"] != "ok" || s.Info["used_memory"] == "" || s.Config["maxmemory-policy"] == "" {
			t.Fatalf("%s: cluster_state %q used_memory %q policy %q", s.Addr, s.Cluster["cluster_state"],
				s.Info["used_memory"], s.Config["maxmemory-policy"])
		}
	}
}
