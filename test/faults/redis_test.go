//go:build faults

package faults

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
	"time"

	"github.com/redis/go-redis/v9"
)

// privateCluster is a 6-node Redis Cluster started with the project's
// deploy/redis-cluster.sh on a free block of ports from 7200 up (the chaos
// tests use 7100 up, the shared cluster 7000).
type privateCluster struct {
	base     int
	dir      string
	password string
	script   string
}

func startPrivateCluster(root string) (*privateCluster, error) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not installed: %w", err)
	}
	base, err := freeBlock()
	if err != nil {
		return nil, err
	}
	c := &privateCluster{base: base, dir: filepath.Join(root, "redis"), password: "surge",
		script: filepath.Join(repo, "deploy", "redis-cluster.sh")}
	if out, err := c.run("start"); err != nil {
		c.stop()
		return nil, fmt.Errorf("start on %d: %w\n%s", base, err, out)
	}
	return c, nil
}

// freeBlock finds six free consecutive ports, bus ports free too.
func freeBlock() (int, error) {
	for base := 7200; base <= 7900; base += 100 {
		if blockFree(base) {
			return base, nil
		}
	}
	return 0, errors.New("no free block of ports between 7200 and 7905")
}

func blockFree(base int) bool {
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

// stop resumes paused nodes, shuts every node down (SIGKILL for those
// that do not) and removes nothing: the engines' directory goes as a whole.
func (c *privateCluster) stop() {
	for p := c.base; p < c.base+6; p++ {
		c.signal(p, syscall.SIGCONT)
	}
	_, _ = c.run("stop")
	for p := c.base; p < c.base+6; p++ {
		c.signal(p, syscall.SIGKILL)
	}
}

// heal resumes paused nodes, restarts dead ones and waits until the
// cluster is healthy.
func (c *privateCluster) heal() error {
	for p := c.base; p < c.base+6; p++ {
		c.signal(p, syscall.SIGCONT)
	}
	if out, err := c.run("restart-dead"); err != nil {
		return fmt.Errorf("redis restart-dead: %w\n%s", err, tailString(out, 20))
	}
	return nil
}

func (c *privateCluster) addrs() []string {
	a := make([]string, 6)
	for i := range a {
		a[i] = fmt.Sprintf("127.0.0.1:%d", c.base+i)
	}
	return a
}

// pid returns the pid of the node on port, or 0 when its pid file is
// missing or names no redis-server of that port any more.
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

// signal sends sig to the node on port; false when it has no process.
func (c *privateCluster) signal(port int, sig syscall.Signal) bool {
	pid := c.pid(port)
	return pid > 0 && syscall.Kill(pid, sig) == nil
}

// client is a cluster client for the test's own reads.
func (c *privateCluster) client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs(), Password: c.password,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 8, PoolSize: 8})
}

// masterOf returns the port of the node that, by its own account, is
// the master serving sku's keys.
func (c *privateCluster) masterOf(ctx context.Context, sku string) (int, error) {
	for p := c.base; p < c.base+6; p++ {
		n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p), Password: c.password,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1})
		slot, err := n.ClusterKeySlot(ctx, "{sku:"+sku+"}").Result()
		raw := ""
		if err == nil {
			raw, err = n.ClusterNodes(ctx).Result()
		}
		_ = n.Close()
		if err == nil && ownsSlot(raw, int(slot)) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no live master owns the slot of %s", sku)
}

// ownsSlot reads CLUSTER NODES and reports whether the "myself" line is a
// master owning slot.
func ownsSlot(nodes string, slot int) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "myself") || !strings.Contains(f[2], "master") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				continue
			}
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			if slot >= a && slot <= b {
				return true
			}
		}
	}
	return false
}
