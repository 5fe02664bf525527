//go:build faults

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/internal/testenv"
)

// privateCluster is the fault test's own Redis Cluster (testenv), on a
// free block of ports from 7200 up (the chaos tests start at 7100, the
// shared cluster is 7000).
type privateCluster struct {
	*testenv.PrivateCluster
}

func startPrivateCluster(root string) (*privateCluster, error) {
	c, err := testenv.StartPrivateCluster(7200, filepath.Join(root, "redis"), "surge")
	if err != nil {
		return nil, err
	}
	return &privateCluster{c}, nil
}

// client is a cluster client for the test's own reads.
func (c *privateCluster) client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: c.Password,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 8, PoolSize: 8})
}

// masterOf returns the port of the node that, by its own account, is
// the master serving sku's keys.
func (c *privateCluster) masterOf(ctx context.Context, sku string) (int, error) {
	for p := c.Base; p < c.Base+6; p++ {
		n := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p), Password: c.Password,
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
