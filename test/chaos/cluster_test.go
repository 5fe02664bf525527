//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
)

// privateCluster is the chaos tests' own Redis Cluster (testenv), with
// the helpers that break and inspect it.
type privateCluster struct {
	*testenv.PrivateCluster
}

// startPrivateCluster starts a cluster on the first free block of six
// ports from 7100 up (SURGE_CHAOS_PORT_BASE sets the first), in a fresh
// directory.
func startPrivateCluster() (*privateCluster, error) {
	from := 7100
	if v := os.Getenv("SURGE_CHAOS_PORT_BASE"); v != "" {
		var err error
		if from, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("SURGE_CHAOS_PORT_BASE=%q: %w", v, err)
		}
	}
	dir, err := os.MkdirTemp("", "surge-chaos-")
	if err != nil {
		return nil, err
	}
	pw := os.Getenv("SURGE_REDIS_PASSWORD")
	if pw == "" {
		pw = "surge"
	}
	c, err := testenv.StartPrivateCluster(from, dir, pw)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &privateCluster{c}, nil
}

// stop shuts every node down and removes the directory.
func (c *privateCluster) stop() {
	c.Stop()
	_ = os.RemoveAll(c.Dir)
}

// heal resumes paused nodes, restarts dead ones and waits until the
// cluster is healthy again.
func (c *privateCluster) heal(t *testing.T) {
	t.Helper()
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
}

func (c *privateCluster) signal(t *testing.T, port int, sig syscall.Signal) {
	t.Helper()
	if err := c.Signal(port, sig); err != nil {
		t.Fatal(err)
	}
}

// node is an admin connection to one node.
func (c *privateCluster) node(t *testing.T, port int) *redis.Client {
	t.Helper()
	n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: c.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	port       int
	flags      string
	slots      [][2]int
}

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// nodes reads CLUSTER NODES as the node on port sees the cluster.
func (c *privateCluster) nodes(ctx context.Context, port int) ([]clusterNode, error) {
	n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: c.Password,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer n.Close()
	raw, err := n.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr := f[1][:strings.IndexAny(f[1], "@")]
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		cn := clusterNode{id: f[0], port: port, flags: f[2], master: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(s, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			cn.slots = append(cn.slots, [2]int{a, b})
		}
		out = append(out, cn)
	}
	return out, nil
}

// shard returns the ports of the master owning slot and of its replica.
func (c *privateCluster) shard(t *testing.T, slot int) (master, replica int) {
	t.Helper()
	ns, err := c.nodes(context.Background(), c.Base)
	if err != nil {
		t.Fatalf("cluster nodes: %v", err)
	}
	var masterID string
	for _, n := range ns {
		if strings.Contains(n.flags, "master") && n.owns(slot) {
			master, masterID = n.port, n.id
		}
	}
	for _, n := range ns {
		if masterID != "" && n.master == masterID {
			replica = n.port
		}
	}
	if master == 0 || replica == 0 {
		t.Fatalf("no master and replica for slot %d in %+v", slot, ns)
	}
	return master, replica
}

// waitPromoted waits until a node other than old and replica sees replica
// as the master owning slot, and returns when that happened.
func (c *privateCluster) waitPromoted(t *testing.T, slot, old, replica int) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for p := c.Base; p < c.Base+6; p++ {
			if p == old || p == replica {
				continue
			}
			ns, err := c.nodes(context.Background(), p)
			if err != nil {
				continue
			}
			for _, n := range ns {
				if n.port == replica && strings.Contains(n.flags, "master") && n.owns(slot) {
					return time.Now()
				}
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("replica %d was not promoted for slot %d within 60s", replica, slot)
	return time.Time{}
}
