package app

import (
	"context"
	"log/slog"

	"surge/pkg/console"
	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/metrics"
	"surge/pkg/ops"
	"surge/pkg/queue"
	"surge/pkg/redisnode"
	"surge/pkg/stock"
)

// consoleDeps are the gateway's parts the operations console shows and
// acts through: the same ones the admin API uses.
type consoleDeps struct {
	cfg     GatewayConfig
	eng     *engines
	api     *httpapi.Server
	tracker *gateway.Tracker
	stock   *stock.Stock
	letters *ops.DeadLetters
	rec     *ops.Reconcile
	log     *slog.Logger
}

// mountConsole mounts the console on the admin listener; the returned func
// closes the console's Redis prober.
func mountConsole(d consoleDeps) (closeConsole func()) {
	topo := d.cfg.AMQP.Topology()
	user, password := d.cfg.Redis.User, d.cfg.Redis.Password
	if d.cfg.ConsoleRedisUser != "" {
		user, password = d.cfg.ConsoleRedisUser, d.cfg.ConsoleRedisPassword
	}
	prober := redisnode.NewProber(redisnode.Options{Username: user, Password: password})
	checks := make([]console.Probe, len(d.api.AdminReady))
	for i, c := range d.api.AdminReady {
		checks[i] = console.Probe{Name: c.Name, Ping: c.Ping}
	}
	adminProxies, _ := httpapi.ParseTrustedProxies(d.cfg.AdminTrustedProxies) // checked by Validate
	var rates func(ctx context.Context) (map[string]console.QueueRate, error)
	if d.cfg.RabbitMQManagementURL != "" {
		m, _ := console.NewManagement(d.cfg.RabbitMQManagementURL, d.cfg.AMQP.URL) // checked by Validate
		rates = m.Rates
	}
	c := &console.Console{
		Token: d.cfg.AdminToken, Store: d.eng.db, Stock: d.api.Stock, Loads: d.api.Stock, Status: d.tracker, States: d.stock,
		Letters: d.letters, Reconcile: d.rec, IdempotencyTTL: d.cfg.IdempotencyTTL, Log: d.log,
		Counters: func(ctx context.Context, skus []string) ([]stock.Counters, error) {
			return stock.ReadCounters(ctx, d.eng.redis, skus)
		},
		SnapshotEvery:  d.cfg.ConsoleSnapshotEvery,
		TrustedProxies: adminProxies,
		Health: &console.Health{
			Checks: checks,
			Queues: append(metrics.TopologyQueues(topo), topo.DiscardedQueue()),
			Depth: func(ctx context.Context, name string) (int, int, error) {
				return queue.QueueDepth(ctx, d.eng.mq, name)
			},
			Rates: rates,
			Redis: prober,
			Seeds: d.cfg.Redis.Addrs,
		},
	}
	d.api.HandleAdmin(console.Prefix, c.Handler())
	return func() { _ = prober.Close() }
}
