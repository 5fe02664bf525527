//go:build chaos

package chaos

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/queue"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/store"
)

const adminToken = "chaos-token"

// pipeline is a gateway and a worker pool on the private cluster, with
// their own exchange, queues and database, plus the clients the checks
// use.
type pipeline struct {
	t     *testing.T
	url   string // the gateway's public listener
	admin string // its admin listener
	cfg   config.Common
	db    *store.Store
	redis *cluster.Client
	stock *stock.Stock
	pub   *queue.Publisher // the reconciler's, to publish late orders again
	wcfg  app.WorkerConfig
}

// failoverDoubt is the gateways' SURGE_FAILOVER_DOUBT here: shorter than
// the default (2m), as the worker runs throughout and settles an order in
// well under a second, and long enough to cover a test's retries after a
// promotion. The checks after a sale wait it out.
const failoverDoubt = 15 * time.Second

func logger() *slog.Logger {
	if os.Getenv("SURGE_CHAOS_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	p := startGatewayOnly(t)
	p.startWorker()
	return p
}

// startGatewayOnly is startPipeline with no worker running: accepted
// orders wait in the queue until startWorker.
func startGatewayOnly(t *testing.T) *pipeline {
	t.Helper()
	var c config.Common
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	c.Redis.Addrs, c.Redis.Password = priv.Addrs(), priv.Password
	c.AMQP.URL = testenv.AMQPURL(t)
	name := testenv.Unique("chaos.orders.")
	c.AMQP.Exchange, c.AMQP.Queue, c.AMQP.DeadQueue = name, name+".created", name+".dead"
	// The tiers outlast a failover (about 7s here), so no order is parked.
	c.AMQP.RetryDelays = []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}
	c.MySQL.DSN = testenv.MySQLDSN(t)
	if err := app.Migrate(context.Background(), c.MySQL.DSN, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apptest.DeleteTopology(c) })
	p := &pipeline{t: t, cfg: c}
	var g *app.Gateway
	gcfg := apptest.GatewayConfig(t, c, adminToken)
	gcfg.FailoverDoubt = failoverDoubt
	p.url, g = apptest.Gateway(t, gcfg, logger())
	p.admin = apptest.AdminURL(g)
	p.wcfg = apptest.WorkerConfig(t, c)
	p.wcfg.Prefetch, p.wcfg.Concurrency = 64, 16
	var err error
	if p.db, err = store.Open(context.Background(), c.MySQL.DSN, store.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.db.Close() })
	p.redis = newClusterClient(t)
	p.stock = stock.New(p.redis, stock.Options{})
	mq, err := queue.Dial(context.Background(), c.AMQP.URL, queue.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mq.Close() })
	if p.pub, err = queue.NewPublisher(mq, c.AMQP.Topology(), queue.PublisherOptions{Channels: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.pub.Close() })
	return p
}

// startWorker starts the pipeline's worker pool, stopped at cleanup.
func (p *pipeline) startWorker() {
	p.t.Helper()
	apptest.Worker(p.t, p.wcfg, logger())
}

func newClusterClient(t *testing.T) *cluster.Client {
	c := cluster.New(cluster.Options{Addrs: priv.Addrs(), Password: priv.Password})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// loadStock creates the product with n units through the admin API, as
// operations would before a sale.
func (p *pipeline) loadStock(sku string, n int) {
	p.t.Helper()
	apptest.PutStock(p.t, apiClient(p.t), p.admin, adminToken, sku, n, "Chaos item", 500)
}

// slot is the cluster slot of sku's keys.
func (p *pipeline) slot(sku string) int {
	p.t.Helper()
	s, err := p.redis.ClusterKeySlot(context.Background(), "{sku:"+sku+"}").Result()
	if err != nil {
		p.t.Fatal(err)
	}
	return int(s)
}

// reconciler is a reconciler on the private cluster and the test's
// database, with a short grace period: the sale is over and drained when
// it runs, so an open reservation with no MySQL order is one whose order
// never reached the queue; it is published again.
func (p *pipeline) reconciler() *reconcile.Reconciler {
	return reconcile.New(p.redis.ClusterClient, reconcile.StoreLedger{Store: p.db},
		reconcile.Options{Grace: 2 * time.Second, Log: logger(), Publisher: p.pub})
}
