package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"

	"surge/pkg/gateway"
	"surge/pkg/httpapi"
	"surge/pkg/idem"
	"surge/pkg/metrics"
	"surge/pkg/ratelimit"
	"surge/pkg/telemetry"
)

// ipLimit builds POST /v1/orders's per-IP limiter, shared by every gateway
// through Redis; nil when turned off (negative rate). Here and in
// customerLimited and ratePolicies, c has its defaults set (NewGateway).
func ipLimit(rdb redis.Scripter, c ratelimit.Config) httpapi.Limiter {
	if l := ratelimit.New(rdb, "ip:", c.IPRate, c.IPBurst); l != nil {
		return l
	}
	return nil
}

// customerLimited holds each customer to the configured budget inside the
// idempotency claim (one script, one Redis call), and says whether it
// does; with the limit off (negative rate) it is records as they are.
func customerLimited(records *idem.Records, c ratelimit.Config) (gateway.Claimer, bool) {
	if c.CustomerRate <= 0 {
		return records, false
	}
	return records.Limited(c.CustomerRate, c.CustomerBurst), true
}

// instrumented builds api's routes, public and admin, mounts GET /metrics
// on the admin ones, times every request by route and status, traces the
// public ones when tracing is on, and gives each a request id; the public
// routes also answer browsers on the CORS origins (the admin listener
// allows no other origin).
func instrumented(api *httpapi.Server, corsOrigins []string, tel *telemetry.Tracing) (public, admin http.Handler) {
	h := api.Handler()
	api.HandleAdmin("GET /metrics", metrics.Handler())
	h = metrics.Middleware(h)
	if tel.Enabled() {
		h = tel.HTTP(h)
	}
	public = httpapi.CORS(corsOrigins, httpapi.RequestIDs(h))
	return public, httpapi.RequestIDs(metrics.Middleware(api.AdminHandler()))
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
