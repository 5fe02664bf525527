package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"surge/pkg/metrics"
)

func init() {
	commands["exporter"] = command{"serve the cluster's per-node and the queues' metrics (exporter [--addr 127.0.0.1:9121])",
		exporterUsage, runExporter}
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
func runExporter(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("exporter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:9121", "listen address")
	if err := fs.Parse(args); err != nil {
		return usagef("exporter: %v", err)
	}
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
	ep, err := metrics.ListenFor(*addr, reg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "exporter listening on %s\n", ep.Addr())
	return ep.Serve(ctx)
}
