package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	apidoc "surge/api"
	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/console"
	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/idem"
	"surge/pkg/keys"
	"surge/pkg/metrics"
	"surge/pkg/ops"
	"surge/pkg/productview"
	"surge/pkg/queue"
	"surge/pkg/ratelimit"
	"surge/pkg/reconcile"
	"surge/pkg/stock"
	"surge/pkg/telemetry"
)

// GatewayConfig is the gateway's configuration (SURGE_ variables).
type GatewayConfig struct {
	config.Common
	// Reconcile tunes the admin API's reconcile like the reconciler's
	// (SURGE_RECONCILE_GRACE, SURGE_RECONCILE_LOOKBACK).
	config.Reconcile
	// CustomerAuth requires customers' tokens on the order routes
	// (SURGE_CUSTOMER_JWT_*, SURGE_CUSTOMER_JWKS_*); off by default.
	config.CustomerAuth
	// HTTPAddr is SURGE_HTTP_ADDR, default 127.0.0.1:8080.
	HTTPAddr string `envconfig:"HTTP_ADDR" default:"127.0.0.1:8080"`
	// AdminAddr is the admin listener (the admin API, /metrics, the
	// operations console): SURGE_ADMIN_ADDR, default 127.0.0.1:8081. The
	// public listener answers none of these.
	AdminAddr string `envconfig:"ADMIN_ADDR" default:"127.0.0.1:8081"`
	// AdminToken guards /v1/admin and the console: SURGE_ADMIN_TOKEN (or
	// the file SURGE_ADMIN_TOKEN_FILE), default "surge-admin", accepted
	// only while the admin listener is on a loopback address (Validate).
	AdminToken string `envconfig:"ADMIN_TOKEN" default:"surge-admin" secret:"true"`
	// ConsoleRedisUser and ConsoleRedisPassword are the Redis user the
	// console's health page reads each node's INFO as (memory, replica
	// lag): SURGE_CONSOLE_REDIS_USER / SURGE_CONSOLE_REDIS_PASSWORD, e.g.
	// surge-ops. Empty: the gateway's own user, which deploy/redis-users.acl
	// refuses INFO, so the page shows the node map (roles, slots, links)
	// without memory and lag.
	ConsoleRedisUser     string `envconfig:"CONSOLE_REDIS_USER"`
	ConsoleRedisPassword string `envconfig:"CONSOLE_REDIS_PASSWORD" secret:"true"`
	// ConsoleSnapshotEvery is how often the console's board and health
	// page read the engines, shared by every open tab:
	// SURGE_CONSOLE_SNAPSHOT_EVERY, default 1s.
	ConsoleSnapshotEvery time.Duration `envconfig:"CONSOLE_SNAPSHOT_EVERY" default:"1s"`
	// RabbitMQManagementURL is the RabbitMQ management API the console's
	// health page reads per-queue rates from: SURGE_RABBITMQ_MANAGEMENT_URL
	// (or _FILE), e.g. http://surge-ops:secret@rabbitmq:15672/; without a
	// user in it, the AMQP URL's is used. Empty: the rates read n/a.
	RabbitMQManagementURL string `envconfig:"RABBITMQ_MANAGEMENT_URL" secret:"true"`
	// AdminTrustedProxies are the proxies in front of the admin listener,
	// CIDRs or addresses: SURGE_ADMIN_TRUSTED_PROXIES, comma-separated,
	// default none. Their X-Forwarded-Proto: https makes the console's
	// session cookie Secure; their X-Forwarded-For names the client whose
	// sign-ins are throttled.
	AdminTrustedProxies []string `envconfig:"ADMIN_TRUSTED_PROXIES"`
	// PublishChannels is the size of the confirm-mode channel pool:
	// SURGE_PUBLISH_CHANNELS, default 8.
	PublishChannels int `envconfig:"PUBLISH_CHANNELS" default:"8"`
	// PublishInFlight is how many order messages may be written and not
	// yet confirmed at once; an order is written as soon as there is room,
	// and the orders arriving while there is none share the next message:
	// SURGE_PUBLISH_IN_FLIGHT, default 4.
	PublishInFlight int `envconfig:"PUBLISH_IN_FLIGHT" default:"4"`
	// PublishMaxBatch bounds the orders in one message, 1-64 (1: one
	// message per order): SURGE_PUBLISH_MAX_BATCH, default 64.
	PublishMaxBatch int `envconfig:"PUBLISH_MAX_BATCH" default:"64"`
	// ConfirmTimeout bounds each publish, from its call to its answer: the
	// wait behind other messages, opening a channel, the write and the
	// broker's confirm (queue.Publisher.Bound). The order status reads an
	// order pending for this plus the cleanup: SURGE_CONFIRM_TIMEOUT,
	// default 2s.
	ConfirmTimeout time.Duration `envconfig:"CONFIRM_TIMEOUT" default:"2s"`
	// ProductTTL is how long a cached product view stays fresh:
	// SURGE_PRODUCT_CACHE_TTL, default 30s.
	ProductTTL time.Duration `envconfig:"PRODUCT_CACHE_TTL" default:"30s"`
	// RateLimit limits POST /v1/orders per customer and per client IP:
	// SURGE_RATE_LIMIT_* (see ratelimit.Config for the defaults).
	RateLimit ratelimit.Config `envconfig:"RATE_LIMIT"`
	// ReserveWaitReplicas makes each new reservation wait until that many
	// replicas acknowledged it (Redis WAIT), so a failover is less likely
	// to lose it: SURGE_RESERVE_WAIT_REPLICAS, default 0 (off). See
	// stock.Options.WaitReplicas for the cost and what a timeout does.
	ReserveWaitReplicas int `envconfig:"RESERVE_WAIT_REPLICAS" default:"0"`
	// ReserveWaitTimeout bounds that wait: SURGE_RESERVE_WAIT_TIMEOUT,
	// default 50ms.
	ReserveWaitTimeout time.Duration `envconfig:"RESERVE_WAIT_TIMEOUT" default:"50ms"`
	// SoldOutReadTimeout bounds the read of a SKU that answers orders sold
	// out with no write (gateway.SoldOut): an order whose read takes
	// longer goes the full way. SURGE_SOLD_OUT_READ_TIMEOUT, default
	// 100ms; 0 turns such answers off (every order runs the reserve
	// script).
	SoldOutReadTimeout time.Duration `envconfig:"SOLD_OUT_READ_TIMEOUT" default:"100ms"`
	// FailoverDoubt is how long after a Redis master took over (a
	// replica promoted) the gateway answers no order "not taken" (sold
	// out, over the purchase limit) from that master's memory: it may lack
	// an order its predecessor accepted, whose message is still on its
	// way to be invoiced, and such an answer is an unknown outcome (503
	// outcome_unknown) instead. Longer than the worker's retry tiers
	// together (1s+10s+60s). SURGE_FAILOVER_DOUBT, default 2m; 0 turns it
	// off.
	FailoverDoubt time.Duration `envconfig:"FAILOVER_DOUBT" default:"2m"`
	// CORSOrigins are the browser origins (exact, e.g.
	// https://shop.example) allowed to call the API: SURGE_CORS_ORIGINS,
	// comma-separated, default none.
	CORSOrigins []string `envconfig:"CORS_ORIGINS"`
	// TrustedProxies are the load balancers in front of the gateway, as
	// CIDRs or addresses: SURGE_TRUSTED_PROXIES, comma-separated, default
	// none. Only for a request from one of them does the per-IP limit
	// use the client address of X-Forwarded-For (httpapi.ClientIP).
	TrustedProxies []string `envconfig:"TRUSTED_PROXIES"`
	// Tracing is the test's span recorder, if any (SURGE_OTLP_ENDPOINT
	// is in Common).
	Tracing
}

// Validate checks the common settings, refuses an idempotency TTL below
// the floor of every retry horizon this gateway announces (Horizons), then
// a weak admin token on an admin API reachable from the network
// (config.CheckAdminToken).
func (c *GatewayConfig) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := c.CustomerAuth.Validate(); err != nil {
		return err
	}
	if err := config.CheckIdempotencyTTL(c.IdempotencyTTL, c.Horizons()...); err != nil {
		return err
	}
	// The admin API and the console are served on AdminAddr.
	if err := config.CheckAdminToken(c.AdminAddr, c.AdminToken); err != nil {
		return fmt.Errorf("SURGE_ADMIN_ADDR=%s: %w", c.AdminAddr, err)
	}
	if _, err := httpapi.ParseTrustedProxies(c.AdminTrustedProxies); err != nil {
		return fmt.Errorf("SURGE_ADMIN_TRUSTED_PROXIES: %w", err)
	}
	if c.RabbitMQManagementURL != "" {
		if _, err := console.NewManagement(c.RabbitMQManagementURL, c.AMQP.URL); err != nil {
			return err
		}
	}
	return nil
}

// Horizons are the retry horizons this gateway announces beyond the
// fixed Retry-After values (config.RetryAfterHorizons): the reconciler's
// grace, within which an unknown outcome settles; the confirm timeout,
// after which a publish is answered unknown; and the longest wait each
// rate limit can ask for (one request's interval, 1/rate: a refused retry
// of an open order is answered unknown with that Retry-After).
func (c *GatewayConfig) Horizons() []config.Horizon {
	rl := ratelimit.NewConfig(c.RateLimit)
	hs := []config.Horizon{c.Reconcile.Horizon(), {Name: "SURGE_CONFIRM_TIMEOUT", After: c.ConfirmTimeout}}
	if rl.CustomerRate > 0 {
		hs = append(hs, config.Horizon{Name: "SURGE_RATE_LIMIT_CUSTOMER_RATE", After: interval(rl.CustomerRate)})
	}
	if rl.IPRate > 0 {
		hs = append(hs, config.Horizon{Name: "SURGE_RATE_LIMIT_IP_RATE", After: interval(rl.IPRate)})
	}
	return hs
}

// interval is the time one request takes to come back at rate per second.
func interval(rate float64) time.Duration { return time.Duration(float64(time.Second) / rate) }

// Gateway is the running gateway.
type Gateway struct {
	cfg   GatewayConfig
	log   *slog.Logger
	eng   *engines
	pub   *queue.Publisher
	srv   *http.Server
	tel   *telemetry.Tracing
	admin *http.Server
	ln    net.Listener
	adln  net.Listener
	Stock *stock.Stock

	products       *productview.Views
	promotions     *cluster.Promotions
	closeConsole   func()
	closeCustomers func()
}

// NewGateway opens the engines, declares the topology and builds the
// HTTP server.
func NewGateway(ctx context.Context, cfg GatewayConfig, log *slog.Logger) (*Gateway, error) {
	cfg.RateLimit = ratelimit.NewConfig(cfg.RateLimit)
	trusted, err := httpapi.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("SURGE_TRUSTED_PROXIES: %w", err)
	}
	customers, closeCustomers, err := customerVerifier(cfg.CustomerAuth, log)
	if err != nil {
		return nil, err
	}
	eng, err := openEngines(ctx, cfg.Common, "gateway", log, needs{})
	if err != nil {
		closeCustomers()
		return nil, err
	}
	tel, err := setupTracing(ctx, cfg.OTLPEndpoint, cfg.Tracing, "surge-gateway", log)
	if err != nil {
		closeCustomers()
		eng.close()
		return nil, err
	}
	topo := cfg.AMQP.Topology()
	pubOpts := queue.PublisherOptions{Channels: cfg.PublishChannels, ConfirmTimeout: cfg.ConfirmTimeout,
		InFlight: cfg.PublishInFlight, MaxBatch: cfg.PublishMaxBatch, Sent: metrics.PublishedBatch}
	if tel.Enabled() {
		pubOpts.Headers = tel.Headers
	}
	pub, err := queue.NewPublisher(eng.mq, topo, pubOpts)
	if err != nil {
		closeCustomers()
		eng.close()
		_ = tel.ShutdownWithin(tracingShutdownTimeout)
		return nil, fmt.Errorf("publisher: %w", err)
	}
	st := stock.New(reserveClient(eng, cfg.ReserveWaitReplicas), stock.Options{StateTTL: cfg.IdempotencyTTL,
		WaitReplicas: cfg.ReserveWaitReplicas, WaitTimeout: cfg.ReserveWaitTimeout, Masters: eng.redis.ClusterClient})
	records := idem.New(eng.fast, cfg.IdempotencyTTL)
	claims, limited := customerLimited(records, cfg.RateLimit)
	prods := newProducts(eng.fast, eng.db, cfg.ProductTTL, log)
	promotions, failovers := watchPromotions(ctx, eng, cfg.FailoverDoubt)
	var hints *gateway.SoldOut
	if cfg.SoldOutReadTimeout > 0 {
		hints = &gateway.SoldOut{Sighter: st, Window: cfg.IdempotencyTTL, Timeout: cfg.SoldOutReadTimeout,
			Failovers: failovers}
	}
	orders := gateway.New(gateway.Service{Stock: st, Idem: claims, Queue: pub, Catalog: catalog{eng.db}, Log: log,
		SoldOut: hints, Failovers: failovers, Observer: gatewayObserver(limited, tel, topo.Exchange)})
	tracker := &gateway.Tracker{Ledger: ledger{eng.db}, Idem: records, Stock: st,
		Undoable: undoable(cfg, pub, orders)}
	api := &httpapi.Server{
		Orders:     orders,
		Status:     tracker,
		Stock:      stockAdmin{&ops.Stock{DB: eng.db, Redis: st}, prods, hints, log},
		AdminToken: cfg.AdminToken,
		Customers:  customers,
		Log:        log,
	}
	// Taking an order needs Redis and RabbitMQ only: MySQL's state is the
	// admin listener's (and the console's) to show.
	redisUp, mqUp := httpapi.Check{Name: "redis", Ping: eng.redis.Ready}, httpapi.Check{Name: "rabbitmq", Ping: eng.mq.Ping}
	api.Ready = []httpapi.Check{redisUp, mqUp}
	api.AdminReady = []httpapi.Check{redisUp, mqUp, {Name: "mysql", Ping: eng.db.Ping}}
	api.IPLimit, api.LimitObserver = ipLimit(eng.fast, cfg.RateLimit), metrics.LimitObserver{}
	api.TrustedProxies = trusted
	g := &Gateway{cfg: cfg, log: log, eng: eng, pub: pub, Stock: st, tel: tel, closeCustomers: closeCustomers,
		promotions: promotions}
	api.RatePolicies = ratePolicies(cfg.RateLimit)
	api.OpenAPI = apidoc.OpenAPI
	public, admin := instrumented(api, cfg.CORSOrigins, tel)
	g.srv = httpapi.NewHTTPServer(cfg.HTTPAddr, public)
	g.admin = httpapi.NewHTTPServer(cfg.AdminAddr, admin)
	letters := &ops.DeadLetters{Queue: ops.QueueDead{Conn: eng.mq, Topology: topo}, DB: eng.db}
	httpapi.MountDeadLetters(api, letters)
	rec := reconcile.New(eng.redis.ClusterClient, reconcile.StoreLedger{Store: eng.db}, reconcile.Options{
		Grace: cfg.Grace, Lookback: cfg.Lookback, StateTTL: cfg.IdempotencyTTL, Log: log, Publisher: pub})
	runs := &ops.Reconcile{Rec: rec, DB: eng.db}
	httpapi.MountReconcile(api, runs)
	g.closeConsole = mountConsole(consoleDeps{cfg: cfg, eng: eng, api: api, tracker: tracker, stock: st,
		letters: letters, rec: runs, log: log})
	api.Handle("GET /v1/products/{sku}", api.Products(prods))
	g.products = prods
	return g, nil
}

// ratePolicies describes the rate limits for RateLimit-Policy headers: a
// budget of burst requests that refills in burst/rate seconds.
func ratePolicies(c ratelimit.Config) map[string]httpapi.RatePolicy {
	p := map[string]httpapi.RatePolicy{}
	if c.CustomerRate > 0 {
		p[idem.ScopeCustomer] = httpapi.RatePolicy{Quota: c.CustomerBurst,
			Window: time.Duration(float64(c.CustomerBurst) / c.CustomerRate * float64(time.Second))}
	}
	if c.IPRate > 0 {
		p[httpapi.ScopeIP] = httpapi.RatePolicy{Quota: c.IPBurst,
			Window: time.Duration(float64(c.IPBurst) / c.IPRate * float64(time.Second))}
	}
	return p
}

// reserveClient is the Redis handle the reserve script runs on: the
// batched one, except when each reservation waits for replicas, which needs
// the connection that ran the script (WAIT counts that connection's writes).
func reserveClient(eng *engines, waitReplicas int) stock.Client {
	if waitReplicas > 0 {
		return eng.redis.ClusterClient
	}
	return eng.fast
}

// Listen binds the public listener (HTTPAddr) and the admin one
// (AdminAddr); Run calls it when it was not called before. A ":0" port
// takes a free one: Addr and AdminAddr say which.
func (g *Gateway) Listen() error {
	ln, err := net.Listen("tcp", g.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", g.cfg.HTTPAddr, err)
	}
	adln, err := net.Listen("tcp", g.cfg.AdminAddr)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen %s (admin): %w", g.cfg.AdminAddr, err)
	}
	g.ln, g.adln = ln, adln
	return nil
}

// Addr is the public listener's address, once Listen returned.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// AdminAddr is the admin listener's address, once Listen returned.
func (g *Gateway) AdminAddr() string { return g.adln.Addr().String() }

// Run serves both listeners (binding them first unless Listen was
// called) until ctx ends or one fails, then shuts down: stop accepting,
// finish in-flight requests (their publishes and releases), close the
// publisher, then the engines.
func (g *Gateway) Run(ctx context.Context) error {
	if g.ln == nil {
		if err := g.Listen(); err != nil {
			g.close()
			return err
		}
	}
	g.log.Info("gateway listening", "addr", g.Addr(), "admin_addr", g.AdminAddr())
	errc := make(chan error, 2)
	go func() { errc <- g.srv.Serve(g.ln) }()
	go func() { errc <- g.admin.Serve(g.adln) }()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if g.promotions != nil {
			g.promotions.Run(wctx, promotionsEvery, g.log)
		}
	}()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	stopWatch()
	<-watched
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = errors.Join(ignoreClosed(err), ignoreClosed(g.srv.Shutdown(sctx)), ignoreClosed(g.admin.Shutdown(sctx)))
	cancel()
	g.close()
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (g *Gateway) close() {
	g.closeConsole()
	g.closeCustomers()
	_ = g.pub.Close()
	g.products.Close()
	g.eng.close()
	if err := g.tel.ShutdownWithin(tracingShutdownTimeout); err != nil {
		g.log.Warn("export the last spans", "err", err)
	}
}

// gatewayObserver counts the order path's steps (the claims as the
// customer limit's decisions when limited) and, when tracing is on, traces
// them; off, the order path carries no tracing code at all.
func gatewayObserver(limited bool, tel *telemetry.Tracing, exchange string) gateway.Observer {
	counted := metrics.GatewayObserver{CustomerLimited: limited}
	if !tel.Enabled() {
		return counted
	}
	return gateway.Observe(counted, telemetry.GatewayObserver{T: tel, Exchange: exchange})
}

// undoable is how long after reserving a request may still take its
// reservation back: the wait for replicas (when reservations wait for
// them), its publish, which the publisher ends within its bound whatever
// it waits for (SURGE_CONFIRM_TIMEOUT, read here from the publisher that
// keeps it), then the undo itself.
func undoable(cfg GatewayConfig, pub *queue.Publisher, orders *gateway.Service) time.Duration {
	d := pub.Bound() + orders.CleanupTimeout
	if cfg.ReserveWaitReplicas > 0 {
		d += cfg.ReserveWaitTimeout
	}
	return d
}

// promotionsEvery is how often a gateway reads the cluster's masters
// (cluster.Promotions): a promotion is seen at most this late, or at once
// when the client's own slot map names a master the last read did not.
const promotionsEvery = time.Second

// watchPromotions reads the cluster's masters once (those of this first
// read count as long established) and returns the watch, nil when doubt
// is 0, with its SKU adapter for the order path.
func watchPromotions(ctx context.Context, eng *engines, doubt time.Duration) (*cluster.Promotions, gateway.Failovers) {
	if doubt <= 0 {
		return nil, nil
	}
	p := cluster.NewPromotions(eng.redis.ClusterClient, doubt)
	_ = p.Look(ctx) // failing, nothing counts as recent until Run's first read
	return p, skuFailovers{p}
}

// skuFailovers asks about a SKU's master by one of its keys.
type skuFailovers struct{ p *cluster.Promotions }

func (f skuFailovers) Recent(ctx context.Context, sku string) bool {
	return f.p.Recent(ctx, keys.Avail(sku))
}
