package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"

	"surge/pkg/httpapi"
	"surge/pkg/metrics"
	"surge/pkg/ratelimit"
)

// orderLimits builds POST /v1/orders's per-customer and per-IP limiters,
// shared by every gateway through Redis and counted in metrics. A limit
// turned off (negative rate) stays nil.
func orderLimits(rdb redis.Scripter, c ratelimit.Config) (customer, ip httpapi.Limiter) {
	c = c.WithDefaults()
	if l := ratelimit.New(rdb, "cust:", c.CustomerRate, c.CustomerBurst); l != nil {
		customer = metrics.Limiter{Scope: "customer", Next: l}
	}
	if l := ratelimit.New(rdb, "ip:", c.IPRate, c.IPBurst); l != nil {
		ip = metrics.Limiter{Scope: "ip", Next: l}
	}
	return customer, ip
}

// instrumented builds api's routes, mounts GET /metrics beside them and
// times every request by route and status.
func instrumented(api *httpapi.Server) http.Handler {
	h := api.Handler()
	api.Handle("GET /metrics", metrics.Handler())
	return metrics.Middleware(h)
}

// serveMetrics answers scrapes on ep (nil: none) until the returned func
// is called; the func returns once the endpoint has shut down.
func serveMetrics(ctx context.Context, ep *metrics.Endpoint, log *slog.Logger) (stop func()) {
	if ep == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ep.Serve(ctx); err != nil {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ep.Addr())
	return func() { cancel(); <-done }
}
