// Package config declares the settings every surge program reads from the
// environment (prefix SURGE_) with envconfig. Each main calls Load once;
// nothing else reads the environment.
package config

import (
	"fmt"
	"time"

	"github.com/kelseyhightower/envconfig"

	"surge/pkg/cluster"
	"surge/pkg/queue"
)

// Redis locates the Redis Cluster.
type Redis struct {
	// Addrs are the seed nodes: SURGE_REDIS_ADDRS, default 127.0.0.1:7000-7005.
	Addrs []string `envconfig:"REDIS_ADDRS" default:"127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"`
	// User is the ACL user (SURGE_REDIS_USER); empty means the default user.
	User string `envconfig:"REDIS_USER"`
	// Password is SURGE_REDIS_PASSWORD, default "surge".
	Password string `envconfig:"REDIS_PASSWORD" default:"surge"`
	// PoolSize is the connections per node: SURGE_REDIS_POOL_SIZE, default
	// 64. A flash sale keeps hundreds of requests in flight; with
	// go-redis's default (10 per CPU) most of them waited for a
	// connection rather than for Redis.
	PoolSize int `envconfig:"REDIS_POOL_SIZE" default:"64"`
	// AutoPipeline batches the hot-path commands that concurrent requests
	// send to one master into one pipeline: SURGE_REDIS_AUTOPIPELINE,
	// default true. In the flash-sale benchmark it cut the gateway's CPU
	// per request by half and nearly doubled its rate (BENCH.md).
	AutoPipeline bool `envconfig:"REDIS_AUTOPIPELINE" default:"true"`
}

// Options turns the settings into cluster client options.
func (r Redis) Options() cluster.Options {
	return cluster.Options{Addrs: r.Addrs, Username: r.User, Password: r.Password, PoolSize: r.PoolSize,
		AutoPipeline: r.AutoPipeline}
}

// AMQP locates RabbitMQ and names the topology.
type AMQP struct {
	// URL is SURGE_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/:
	// one URL, or the nodes of one cluster comma-separated (each client
	// dials them in turn and moves to the next one when its node is lost).
	URL string `envconfig:"AMQP_URL" default:"amqp://guest:guest@127.0.0.1:5672/"`
	// Exchange, Queue and DeadQueue override the names operators rely on
	// (README: orders, orders.created, orders.dead; tests use their own);
	// empty means the defaults.
	Exchange  string `envconfig:"AMQP_EXCHANGE"`
	Queue     string `envconfig:"AMQP_QUEUE"`
	DeadQueue string `envconfig:"AMQP_DEAD_QUEUE"`
	// RetryDelays are the retry tiers, default 1s,10s,60s.
	RetryDelays []time.Duration `envconfig:"AMQP_RETRY_DELAYS" default:"1s,10s,60s"`
}

// Topology returns the queue topology with defaults applied.
func (a AMQP) Topology() queue.Topology {
	t := queue.Topology{Exchange: a.Exchange, Queue: a.Queue, DeadQueue: a.DeadQueue, RetryDelays: a.RetryDelays}
	if a.Exchange != "" {
		t.DeadExchange = a.Exchange + ".dlx"
		t.RetryExchange = a.Exchange + ".retry"
	}
	return t.WithDefaults()
}

// MySQL locates the database.
type MySQL struct {
	// DSN is SURGE_MYSQL_DSN, default root@tcp(127.0.0.1:3306)/surge.
	DSN string `envconfig:"MYSQL_DSN" default:"root@tcp(127.0.0.1:3306)/surge"`
	// MaxConns bounds the pool: SURGE_MYSQL_MAX_CONNS, default 50.
	MaxConns int `envconfig:"MYSQL_MAX_CONNS" default:"50"`
}

// Common holds what every service shares.
// The sections are embedded so that their variables keep the plain
// SURGE_ prefix (envconfig nests the names of named struct fields).
type Common struct {
	Redis
	AMQP
	MySQL
	// LogLevel is debug, info, warn or error: SURGE_LOG_LEVEL, default info.
	LogLevel string `envconfig:"LOG_LEVEL" default:"info"`
	// IdempotencyTTL is how long idempotency records and per-order states
	// live, and the length of the windows order ids are derived in:
	// SURGE_IDEMPOTENCY_TTL, default 24h, at least 1s (per-order states
	// expire in whole seconds).
	IdempotencyTTL time.Duration `envconfig:"IDEMPOTENCY_TTL" default:"24h"`
}

// MinIdempotencyTTL is the shortest SURGE_IDEMPOTENCY_TTL accepted.
const MinIdempotencyTTL = time.Second

// Validate rejects settings that parse but cannot work.
func (c Common) Validate() error {
	if c.IdempotencyTTL < MinIdempotencyTTL {
		return fmt.Errorf("SURGE_IDEMPOTENCY_TTL=%v: must be at least %v (order states expire in whole seconds)",
			c.IdempotencyTTL, MinIdempotencyTTL)
	}
	return nil
}

// Load fills cfg (a pointer to a struct, usually embedding Common) from
// SURGE_ variables, then checks it with its Validate method, when it has
// one.
func Load(cfg any) error {
	if err := envconfig.Process("surge", cfg); err != nil {
		return fmt.Errorf("read SURGE_ configuration: %w", err)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("read SURGE_ configuration: %w", err)
		}
	}
	return nil
}
