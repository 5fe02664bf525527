package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"surge/pkg/queue"
)

var (
	descQueueUp = prometheus.NewDesc(Namespace+"_queue_up",
		"1 when the queue exists and the broker answered at this scrape.", []string{"queue"}, nil)
	descQueueMessages = prometheus.NewDesc(Namespace+"_queue_messages",
		"Messages ready in the queue (unacknowledged deliveries not counted).", []string{"queue"}, nil)
	descQueueConsumers = prometheus.NewDesc(Namespace+"_queue_consumers",
		"Consumers attached to the queue.", []string{"queue"}, nil)
)

// QueueCollector exports the depth and consumers of RabbitMQ queues (the
// work queue, the dead-letter queue, the retry tiers), read at each scrape
// with a passive declare.
type QueueCollector struct {
	conn    *queue.Conn
	queues  []string
	timeout time.Duration
}

var _ prometheus.Collector = (*QueueCollector)(nil)

// NewQueueCollector returns a collector of queues on conn.
func NewQueueCollector(conn *queue.Conn, queues ...string) *QueueCollector {
	return &QueueCollector{conn: conn, queues: queues, timeout: 5 * time.Second}
}

// TopologyQueues lists the queues of topo worth watching: work, dead and
// retry tiers.
func TopologyQueues(topo queue.Topology) []string {
	topo = queue.NewTopology(topo)
	return append([]string{topo.Queue, topo.DeadQueue}, topo.RetryQueues()...)
}

// Describe sends the collector's descriptors.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQueueUp
	ch <- descQueueMessages
	ch <- descQueueConsumers
}

// Collect reads each queue.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, q := range c.queues {
		msgs, cons, err := queue.QueueDepth(ctx, c.conn, q)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(descQueueUp, prometheus.GaugeValue, 0, q)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descQueueUp, prometheus.GaugeValue, 1, q)
		ch <- prometheus.MustNewConstMetric(descQueueMessages, prometheus.GaugeValue, float64(msgs), q)
		ch <- prometheus.MustNewConstMetric(descQueueConsumers, prometheus.GaugeValue, float64(cons), q)
	}
}
