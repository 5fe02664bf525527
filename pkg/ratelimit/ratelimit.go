// Package ratelimit keeps request budgets in Redis Cluster, shared by every
// gateway instance: one key per subject (a customer, an IP) under its own
// hash tag, spent by one Lua script (lua/ratelimit.lua, GCRA on Redis's
// clock). A subject idle long enough to refill its budget has no key, so
// memory follows the active subjects only.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/lua"
	"surge/pkg/keys"
)

// Config is the gateway's rate limits on POST /v1/orders. In a struct
// literal a zero field means its default, set once by NewConfig where the
// gateway is built; a negative rate turns that limit off. The envconfig
// defaults repeat the same values for the services.
type Config struct {
	// CustomerRate is the sustained requests per second one customer may
	// send: SURGE_RATE_LIMIT_CUSTOMER_RATE, default 20.
	CustomerRate float64 `envconfig:"CUSTOMER_RATE" default:"20"`
	// CustomerBurst is how many requests a customer may send at once:
	// SURGE_RATE_LIMIT_CUSTOMER_BURST, default 40.
	CustomerBurst int `envconfig:"CUSTOMER_BURST" default:"40"`
	// IPRate is the sustained requests per second from one client IP:
	// SURGE_RATE_LIMIT_IP_RATE, default 10000. It is high on purpose: many
	// customers sit behind one proxy, and a load test comes from one
	// machine.
	IPRate float64 `envconfig:"IP_RATE" default:"10000"`
	// IPBurst is SURGE_RATE_LIMIT_IP_BURST, default 20000.
	IPBurst int `envconfig:"IP_BURST" default:"20000"`
}

// Defaults of Config's fields.
const (
	DefaultCustomerRate  = 20
	DefaultCustomerBurst = 40
	DefaultIPRate        = 10000
	DefaultIPBurst       = 20000
)

// NewConfig returns c with every zero field set to its default.
func NewConfig(c Config) Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.CustomerRate == 0 {
		c.CustomerRate = DefaultCustomerRate
	}
	if c.CustomerBurst == 0 {
		c.CustomerBurst = DefaultCustomerBurst
	}
	if c.IPRate == 0 {
		c.IPRate = DefaultIPRate
	}
	if c.IPBurst == 0 {
		c.IPBurst = DefaultIPBurst
	}
}

// Limiter spends requests from per-subject budgets: Rate per second
// sustained, Burst at once.
type Limiter struct {
	rdb      redis.Scripter
	prefix   string
	interval int64 // microseconds between requests at the sustained rate
	burst    int
}

// New returns a limiter of rate requests per second with the given burst,
// keyed as prefix + subject. It returns nil when rate is not positive (the
// limit is off); a nil *Limiter allows everything.
func New(rdb redis.Scripter, prefix string, rate float64, burst int) *Limiter {
	if rate <= 0 {
		return nil
	}
	interval := int64(math.Max(1, math.Round(1e6/rate)))
	if burst < 1 {
		burst = 1
	}
	return &Limiter{rdb: rdb, prefix: prefix, interval: interval, burst: burst}
}

// Allow spends one request of subject's budget. When the budget is empty
// it returns false and how long to wait before one request fits again;
// nothing is spent then. Errors come from Redis: callers usually let the
// request through (fail open) rather than refuse everyone.
func (l *Limiter) Allow(ctx context.Context, subject string) (bool, time.Duration, error) {
	if l == nil {
		return true, 0, nil
	}
	key := keys.RateLimit(l.prefix + subject)
	res, err := lua.RateLimit.Run(ctx, l.rdb, []string{key}, l.interval, l.burst).Int64Slice()
	if err != nil {
		return true, 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	if len(res) != 2 {
		return true, 0, fmt.Errorf("rate limit %s: unexpected reply %v", key, res)
	}
	return res[0] == 1, time.Duration(res[1]) * time.Microsecond, nil
}
