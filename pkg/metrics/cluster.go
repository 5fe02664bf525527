package metrics

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"surge/pkg/redisnode"
)

// ClusterOptions configures a ClusterCollector.
type ClusterOptions struct {
	// Seeds are addresses asked for the topology; every node listed by
	// CLUSTER NODES is then scraped, replicas included.
	Seeds []string
	// Username and Password authenticate (surge-ops needs INFO and
	// CLUSTER NODES only).
	Username, Password string
	// TLS, when set, is used to reach every node. Default nil: plain TCP.
	TLS *tls.Config
	// Timeout bounds one scrape. Default 5s.
	Timeout time.Duration
}

// ClusterCollector exports the Redis Cluster's health per node, read at
// each scrape: whether the node answers, its role, cluster_state,
// used_memory against maxmemory, evicted_keys, instantaneous_ops_per_sec,
// and each replica's lag behind its master. Register it on Registry (the
// exporter mode of opsctl, or the reconciler) so one scrape sees the
// cluster.
type ClusterCollector struct {
	opts  ClusterOptions
	probe *redisnode.Prober
}

var _ prometheus.Collector = (*ClusterCollector)(nil)

func nodeDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "redis", name), help, []string{"node"}, nil)
}

var (
	descNodeUp       = nodeDesc("node_up", "1 when the node answered INFO and CLUSTER INFO at this scrape.")
	descNodeMaster   = nodeDesc("node_master", "1 when the node is a master, 0 for a replica.")
	descStateOK      = nodeDesc("cluster_state_ok", "1 when the node reports cluster_state:ok.")
	descUsedMemory   = nodeDesc("used_memory_bytes", "Memory the node uses (INFO used_memory).")
	descMaxMemory    = nodeDesc("maxmemory_bytes", "The node's maxmemory (0: unlimited).")
	descEvicted      = nodeDesc("evicted_keys_total", "Keys the node evicted since it started (INFO evicted_keys).")
	descOps          = nodeDesc("instantaneous_ops_per_sec", "Commands per second the node processes (INFO instantaneous_ops_per_sec).")
	descReplicas     = nodeDesc("connected_replicas", "Replicas connected to a master.")
	descLagBytes     = nodeDesc("replication_lag_bytes", "How far a replica's acknowledged offset is behind its master's, as the master sees it.")
	descLagSeconds   = nodeDesc("replication_lag_seconds", "Seconds since a replica last acknowledged its master.")
	descLinkUp       = nodeDesc("master_link_up", "1 when a replica's link to its master is up.")
	descMasters      = prometheus.NewDesc(Namespace+"_redis_cluster_masters", "Masters serving slots.", nil, nil)
	descUnreplicated = prometheus.NewDesc(Namespace+"_redis_cluster_masters_without_replica",
		"Masters serving slots with no replica in sync: a failure of one of them loses its slots.", nil, nil)
)

// NewClusterCollector returns a collector of the cluster seen from opts.Seeds.
func NewClusterCollector(opts ClusterOptions) *ClusterCollector {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &ClusterCollector{opts: opts, probe: redisnode.NewProber(redisnode.Options{
		Username: opts.Username, Password: opts.Password, Timeout: opts.Timeout / 2, TLS: opts.TLS,
	})}
}

// Close closes the collector's connections.
func (c *ClusterCollector) Close() error { return c.probe.Close() }

// Describe sends every descriptor the collector may emit.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeUp, descNodeMaster, descStateOK, descUsedMemory, descMaxMemory,
		descEvicted, descOps, descReplicas, descLagBytes, descLagSeconds, descLinkUp, descMasters, descUnreplicated} {
		ch <- d
	}
}

// Collect scrapes every node. A cluster no seed answers yields only the
// seeds' node_up 0, which is what the alerts watch.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	nodes, err := c.probe.Topology(ctx, c.opts.Seeds)
	if err != nil {
		for _, s := range c.opts.Seeds {
			ch <- gauge(descNodeUp, 0, s)
		}
		return
	}
	snaps := c.probe.SnapshotAll(ctx, redisnode.Addrs(nodes))
	byAddr := map[string]redisnode.Snapshot{}
	for _, s := range snaps {
		byAddr[s.Addr] = s
		collectNode(ch, s)
	}
	collectReplication(ch, nodes, byAddr)
}

func collectNode(ch chan<- prometheus.Metric, s redisnode.Snapshot) {
	if s.Err != nil {
		ch <- gauge(descNodeUp, 0, s.Addr)
		return
	}
	ch <- gauge(descNodeUp, 1, s.Addr)
	ch <- gauge(descNodeMaster, b2f(s.Info["role"] == "master"), s.Addr)
	ch <- gauge(descStateOK, b2f(s.Cluster["cluster_state"] == "ok"), s.Addr)
	for _, m := range []struct {
		d   *prometheus.Desc
		key string
		t   prometheus.ValueType
	}{
		{descUsedMemory, "used_memory", prometheus.GaugeValue},
		{descMaxMemory, "maxmemory", prometheus.GaugeValue},
		{descEvicted, "evicted_keys", prometheus.CounterValue},
		{descOps, "instantaneous_ops_per_sec", prometheus.GaugeValue},
	} {
		if v, ok := redisnode.Float(s.Info, m.key); ok {
			ch <- prometheus.MustNewConstMetric(m.d, m.t, v, s.Addr)
		}
	}
	switch s.Info["role"] {
	case "master":
		ch <- gauge(descReplicas, float64(len(redisnode.Replicas(s.Info))), s.Addr)
	case "slave":
		ch <- gauge(descLinkUp, b2f(s.Info["master_link_status"] == "up"), s.Addr)
	}
}

// collectReplication reports each replica's lag as its master sees it, and
// how many slot-serving masters have no replica in sync.
func collectReplication(ch chan<- prometheus.Metric, nodes []redisnode.Node, byAddr map[string]redisnode.Snapshot) {
	masters, unreplicated := 0, 0
	for _, n := range nodes {
		if !n.IsMaster() || len(n.Slots) == 0 || n.Failing() {
			continue
		}
		masters++
		s := byAddr[n.Addr]
		online := 0
		for _, r := range redisnode.Replicas(s.Info) {
			ch <- gauge(descLagBytes, float64(r.LagBytes), r.Addr)
			ch <- gauge(descLagSeconds, float64(r.LagSeconds), r.Addr)
			if r.State == "online" {
				online++
			}
		}
		if s.Err != nil || online == 0 {
			unreplicated++
		}
	}
	ch <- prometheus.MustNewConstMetric(descMasters, prometheus.GaugeValue, float64(masters))
	ch <- prometheus.MustNewConstMetric(descUnreplicated, prometheus.GaugeValue, float64(unreplicated))
}

func gauge(d *prometheus.Desc, v float64, node string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, node)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
