package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"surge/pkg/metrics"
)

func (c *cli) exporterCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "exporter [--addr 127.0.0.1:9121]",
		Short: "serve the cluster's per-node and the queues' metrics (exporter [--addr 127.0.0.1:9121])",
		Args:  noArgs("exporter"),
		RunE: action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			e, err := c.env()
			if err != nil {
				return err
			}
			return runExporter(ctx, e, addr)
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9121", "listen address")
	return withUsage(cmd, exporterUsage)
}

const exporterUsage = `opsctl exporter [--addr 127.0.0.1:9121]
Serve GET /metrics with the Redis Cluster read node by node and the order queues'
depth at each scrape, until SIGINT or SIGTERM. Run it as surge-exporter.
flags:
  --addr A   listen address (default 127.0.0.1:9121)`

// runExporter serves GET /metrics with the Redis Cluster read node by node
// and the order queues' depth at each scrape, until SIGINT or SIGTERM. Run
// it as surge-exporter: it needs INFO and CLUSTER NODES on Redis and passive
// declares on RabbitMQ.
func runExporter(ctx context.Context, e *env, addr string) error {
	mq, err := e.AMQP(ctx)
	if err != nil {
		return err
	}
	cc := metrics.NewClusterCollector(metrics.ClusterOptions{
		Seeds: e.cfg.Redis.Addrs, Username: e.cfg.Redis.User, Password: e.cfg.Redis.Password,
		TLS: e.cfg.Redis.TLSConfig(),
	})
	defer cc.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), cc,
		metrics.NewQueueCollector(mq, metrics.TopologyQueues(e.cfg.AMQP.Topology())...))
	ep, err := metrics.ListenFor(addr, reg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "exporter listening on %s\n", ep.Addr())
	return ep.Serve(ctx)
}
