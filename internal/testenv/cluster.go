package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// PrivateCluster is a 6-node Redis Cluster (3 masters, 3 replicas) of a
// test binary's own, started and stopped with the project's
// deploy/redis-cluster.sh on a free block of ports, so tests that kill or
// pause nodes never touch the shared cluster on 7000-7005.
type PrivateCluster struct {
	// Base is the first node's port; the nodes use Base to Base+5.
	Base int
	// Dir holds the nodes' data, configs and logs.
	Dir      string
	Password string
	// TLS holds the certificates when the cluster speaks TLS only
	// (WithTLS); nil for plain TCP.
	TLS    *TLSFiles
	script string
	tls    bool
}

// ClusterOption changes how StartPrivateCluster starts a cluster.
type ClusterOption func(*PrivateCluster)

// WithTLS starts the cluster with TLS only: a fresh CA and certificates
// under Dir/tls (MakeTLSFiles), no plain port, TLS on the cluster bus and
// for replication, client certificates required.
func WithTLS() ClusterOption { return func(c *PrivateCluster) { c.tls = true } }

// StartPrivateCluster starts a cluster on the first block of six free
// ports (their bus ports, +10000, free too) from `from` up, in steps of
// 100, with its state under dir.
func StartPrivateCluster(from int, dir, password string, opts ...ClusterOption) (*PrivateCluster, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not installed (deploy/install-deps.sh): %w", err)
	}
	base, err := freeBlock(from)
	if err != nil {
		return nil, err
	}
	c := &PrivateCluster{Base: base, Dir: dir, Password: password, script: filepath.Join(repoRoot(), "deploy", "redis-cluster.sh")}
	for _, o := range opts {
		o(c)
	}
	if c.tls {
		if c.TLS, err = MakeTLSFiles(filepath.Join(dir, "tls")); err != nil {
			return nil, fmt.Errorf("private cluster certificates: %w", err)
		}
	}
	if out, err := c.Run("start"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("start private cluster on %d: %w\n%s", base, err, out)
	}
	return c, nil
}

// repoRoot is the checkout this file belongs to.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func freeBlock(from int) (int, error) {
	for base := from; base <= 7900; base += 100 {
		if blockFree(base) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no free block of six ports between %d and 7905", from)
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

// Run runs deploy/redis-cluster.sh with args against this cluster.
func (c *PrivateCluster) Run(args ...string) (string, error) {
	cmd := exec.Command(c.script, args...)
	// The shared cluster's ACL file (deploy/users.sh) sets the default
	// user's password to the shared one: a private cluster loads none, so
	// its own password stands.
	cmd.Env = append(os.Environ(), fmt.Sprintf("SURGE_CLUSTER_PORT_BASE=%d", c.Base),
		"SURGE_VAR_DIR="+c.Dir, "SURGE_REDIS_PASSWORD="+c.Password, "SURGE_CLUSTER_TIMEOUT=90",
		"SURGE_REDIS_ACL_FILE="+filepath.Join(c.Dir, "no-acl-file"))
	if c.TLS != nil {
		cmd.Env = append(cmd.Env, "SURGE_REDIS_TLS_DIR="+c.TLS.Dir)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Stop resumes paused nodes, shuts every node down and kills those that
// do not stop. It leaves Dir to its owner.
func (c *PrivateCluster) Stop() {
	for p := c.Base; p < c.Base+6; p++ {
		_ = c.Signal(p, syscall.SIGCONT) // a paused node cannot shut down
	}
	_, _ = c.Run("stop")
	for p := c.Base; p < c.Base+6; p++ {
		_ = c.Signal(p, syscall.SIGKILL)
	}
}

// Heal resumes paused nodes, restarts dead ones and waits until the
// cluster is healthy again.
func (c *PrivateCluster) Heal() error {
	for p := c.Base; p < c.Base+6; p++ {
		_ = c.Signal(p, syscall.SIGCONT)
	}
	if out, err := c.Run("restart-dead"); err != nil {
		return fmt.Errorf("heal private cluster: %w\n%s", err, out)
	}
	return nil
}

// Addrs are the nodes' addresses.
func (c *PrivateCluster) Addrs() []string {
	a := make([]string, 6)
	for i := range a {
		a[i] = fmt.Sprintf("127.0.0.1:%d", c.Base+i)
	}
	return a
}

// PID returns the pid of the node on port, read from its pid file, or 0
// when that file is missing or names no redis-server of that port any more
// (the node died and its pid may belong to another process now).
func (c *PrivateCluster) PID(port int) int {
	b, err := os.ReadFile(filepath.Join(c.Dir, "redis-cluster", strconv.Itoa(port), "redis.pid"))
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

// ErrNoNode means no live redis-server serves the port.
var ErrNoNode = errors.New("no redis-server process on that port")

// Signal sends sig to the node on port.
func (c *PrivateCluster) Signal(port int, sig syscall.Signal) error {
	pid := c.PID(port)
	if pid <= 0 {
		return fmt.Errorf("signal %v to node %d: %w", sig, port, ErrNoNode)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %v to node %d (pid %d): %w", sig, port, pid, err)
	}
	return nil
}
