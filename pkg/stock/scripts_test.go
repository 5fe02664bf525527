package stock_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
	"surge/lua"
	"surge/pkg/stock"
)

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// clusterOf is a client whose slot map splits the slots between masters
// (the real cluster's first node and addresses nothing answers on), as the
// map reads while a master is down and not yet failed over.
func clusterOf(t *testing.T, masters ...string) *redis.ClusterClient {
	t.Helper()
	per := 16384 / len(masters)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       masters[:1],
		Password:    testenv.RedisPassword(),
		DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond,
		MaxRetries:  -1,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			var slots []redis.ClusterSlot
			for i, m := range masters {
				end := (i+1)*per - 1
				if i == len(masters)-1 {
					end = 16383
				}
				slots = append(slots, redis.ClusterSlot{Start: i * per, End: end, Nodes: []redis.ClusterNode{{Addr: m}}})
			}
			return slots, nil
		},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLoadScriptsSkipsAnUnreachableMaster: a service starting while one
// master is down loads its scripts on the others and names the one it
// skipped, instead of refusing to start (a restarted gateway or worker
// stayed down until the failover ended).
func TestLoadScriptsSkipsAnUnreachableMaster(t *testing.T) {
	testenv.Redis(t) // skips, or fails under CI, when the cluster is down
	live, dead := testenv.RedisAddrs()[0], closedAddr(t)
	if err := stock.LoadScripts(context.Background(), clusterOf(t, live, dead)); err == nil {
		t.Fatal("LoadScripts with a master down: no error, want one (it stays strict)")
	}
	// A fresh client, as a starting service has: go-redis leaves a node it
	// marked failing out of ForEachMaster.
	skipped, err := stock.LoadScriptsReachable(context.Background(), clusterOf(t, live, dead))
	if err != nil {
		t.Fatalf("LoadScriptsReachable with one master down: %v", err)
	}
	// go-redis names a loopback node by its port alone.
	_, port, _ := net.SplitHostPort(dead)
	if len(skipped) != 1 || !strings.HasSuffix(skipped[0], ":"+port) {
		t.Fatalf("skipped %v, want [%s]", skipped, dead)
	}
	node := redis.NewClient(&redis.Options{Addr: live, Password: testenv.RedisPassword()})
	defer node.Close()
	for _, s := range lua.All() {
		ok, err := s.Exists(context.Background(), node).Result()
		if err != nil || len(ok) != 1 || !ok[0] {
			t.Fatalf("script %s not loaded on the reachable master %s: %v %v", s.Hash(), live, ok, err)
		}
	}
}

// TestLoadScriptsRefusesWithNoMasterReachable: with every master down the
// start fails, naming them, rather than serving nothing.
func TestLoadScriptsRefusesWithNoMasterReachable(t *testing.T) {
	testenv.Redis(t)
	c := clusterOf(t, closedAddr(t), closedAddr(t))
	skipped, err := stock.LoadScriptsReachable(context.Background(), c)
	if err == nil {
		t.Fatalf("every master down: no error (skipped %v)", skipped)
	}
}
