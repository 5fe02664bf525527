//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// privateCluster is a 6-node Redis Cluster of this test binary's own,
// started and stopped with the project's script.
type privateCluster struct {
	base     int
	dir      string
	password string
	script   string
}

// startPrivateCluster starts a cluster on the first free block of six
// ports (and their bus ports) from 7100 up, in a fresh directory.
func startPrivateCluster() (*privateCluster, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not installed (deploy/install-deps.sh): %w", err)
	}
	base, err := freeBase()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "surge-chaos-")
	if err != nil {
		return nil, err
	}
	pw := os.Getenv("SURGE_REDIS_PASSWORD")
	if pw == "" {
		pw = "surge"
	}
	c := &privateCluster{base: base, dir: dir, password: pw, script: filepath.Join(root, "deploy", "redis-cluster.sh")}
	if out, err := c.run("start"); err != nil {
		c.stop()
		return nil, fmt.Errorf("start private cluster on %d: %w\n%s", base, err, out)
	}
	return c, nil
}

// freeBase finds six free consecutive ports whose bus ports are free too.
func freeBase() (int, error) {
	if v := os.Getenv("SURGE_CHAOS_PORT_BASE"); v != "" {
		return strconv.Atoi(v)
	}
	for base := 7100; base <= 7900; base += 100 {
		if portsFree(base) {
			return base, nil
		}
	}
	return 0, errors.New("no free block of ports between 7100 and 7905")
}

func portsFree(base int) bool {
	for p := base; p < base+6; p++ {
		for _, port := range []int{p, p + 10000} {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				return false
			}
			_ = ln.Close()
		}
	}
	return true
}

func (c *privateCluster) run(args ...string) (string, error) {
	cmd := exec.Command(c.script, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SURGE_CLUSTER_PORT_BASE=%d", c.base),
		"SURGE_VAR_DIR="+c.dir, "SURGE_REDIS_PASSWORD="+c.password, "SURGE_CLUSTER_TIMEOUT=90")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stop shuts every node down and removes the directory.
func (c *privateCluster) stop() {
	for p := c.base; p < c.base+6; p++ {
		if pid := c.pid(p); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT) // a paused node cannot shut down
		}
	}
	_, _ = c.run("stop")
	for p := c.base; p < c.base+6; p++ {
		if pid := c.pid(p); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(c.dir)
}

// heal resumes paused nodes, restarts dead ones and waits until the
// cluster is healthy again.
func (c *privateCluster) heal(t *testing.T) {
	t.Helper()
	for p := c.base; p < c.base+6; p++ {
		if pid := c.pid(p); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	if out, err := c.run("restart-dead"); err != nil {
		t.Fatalf("heal private cluster: %v\n%s", err, out)
	}
}

func (c *privateCluster) addrs() []string {
	a := make([]string, 6)
	for i := range a {
		a[i] = fmt.Sprintf("127.0.0.1:%d", c.base+i)
	}
	return a
}

// pid returns the pid of the node on port, read from its pid file, or 0
// when that file is missing or names no redis-server of that port any more
// (the node died and its pid may belong to another process now).
func (c *privateCluster) pid(port int) int {
	b, err := os.ReadFile(filepath.Join(c.dir, "redis-cluster", strconv.Itoa(port), "redis.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		return 0
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmd), "redis-server") ||
		!strings.Contains(string(cmd), fmt.Sprintf(":%d", port)) {
		return 0
	}
	return pid
}

func (c *privateCluster) signal(t *testing.T, port int, sig syscall.Signal) {
	t.Helper()
	pid := c.pid(port)
	if pid <= 0 {
		t.Fatalf("no pid for node %d", port)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to node %d (pid %d): %v", sig, port, pid, err)
	}
}

// node is an admin connection to one node.
func (c *privateCluster) node(t *testing.T, port int) *redis.Client {
	t.Helper()
	n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: c.password,
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
	n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: c.password,
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
	ns, err := c.nodes(context.Background(), c.base)
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
		for p := c.base; p < c.base+6; p++ {
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
