// Package config declares the settings every surge program reads from the
// environment (prefix SURGE_) with envconfig. Each main calls Load once;
// nothing else reads the environment. Secrets may come from files
// (SURGE_<NAME>_FILE, secret.go).
package config

import (
	"crypto/tls"
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
	// Password is SURGE_REDIS_PASSWORD (or the file
	// SURGE_REDIS_PASSWORD_FILE), default "surge".
	Password string `envconfig:"REDIS_PASSWORD" default:"surge" secret:"true"`
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
	// TLS speaks TLS to every node: SURGE_REDIS_TLS, default false. The
	// files below are read once, when the configuration is loaded.
	TLS bool `envconfig:"REDIS_TLS"`
	// TLSCAFile is the PEM file of the CA that signed the nodes'
	// certificates: SURGE_REDIS_TLS_CA_FILE, default the system's roots.
	TLSCAFile string `envconfig:"REDIS_TLS_CA_FILE"`
	// TLSCertFile and TLSKeyFile are the client certificate and its key,
	// for nodes that verify clients (tls-auth-clients, Redis's default):
	// SURGE_REDIS_TLS_CERT_FILE and SURGE_REDIS_TLS_KEY_FILE, both or
	// neither; default none.
	TLSCertFile string `envconfig:"REDIS_TLS_CERT_FILE"`
	TLSKeyFile  string `envconfig:"REDIS_TLS_KEY_FILE"`
	// TLSServerName is the name every node's certificate must carry:
	// SURGE_REDIS_TLS_SERVER_NAME, default the host of the address each
	// node is dialled on (an IP address must then be in the certificate).
	TLSServerName string `envconfig:"REDIS_TLS_SERVER_NAME"`

	// tls is built from the fields above by Validate; nil means plain TCP.
	tls *tls.Config
}

// Options turns the settings into cluster client options.
func (r Redis) Options() cluster.Options {
	return cluster.Options{Addrs: r.Addrs, Username: r.User, Password: r.Password, PoolSize: r.PoolSize,
		AutoPipeline: r.AutoPipeline, TLS: r.tls}
}

// TLSConfig is the TLS configuration for the nodes, nil without
// SURGE_REDIS_TLS. Clients that dial nodes one by one (preflight, the
// exporter) use it as the cluster client does.
func (r Redis) TLSConfig() *tls.Config { return r.tls }

// AMQP locates RabbitMQ and names the topology.
type AMQP struct {
	// URL is SURGE_AMQP_URL (or the file SURGE_AMQP_URL_FILE), default
	// amqp://guest:guest@127.0.0.1:5672/: one URL, or the nodes of one
	// cluster comma-separated (each client dials them in turn and moves to
	// the next one when its node is lost).
	URL string `envconfig:"AMQP_URL" default:"amqp://guest:guest@127.0.0.1:5672/" secret:"true"`
	// Exchange, Queue and DeadQueue override the names operators rely on
	// (README: orders, orders.created, orders.dead; tests use their own);
	// empty means the defaults.
	Exchange  string `envconfig:"AMQP_EXCHANGE"`
	Queue     string `envconfig:"AMQP_QUEUE"`
	DeadQueue string `envconfig:"AMQP_DEAD_QUEUE"`
	// RetryDelays are the retry tiers, default 1s,10s,60s.
	RetryDelays []time.Duration `envconfig:"AMQP_RETRY_DELAYS" default:"1s,10s,60s"`
}

// Topology returns the queue topology, every name set (queue.NewTopology):
// the one value the services and their tools read the names from.
func (a AMQP) Topology() queue.Topology {
	t := queue.Topology{Exchange: a.Exchange, Queue: a.Queue, DeadQueue: a.DeadQueue, RetryDelays: a.RetryDelays}
	if a.Exchange != "" {
		t.DeadExchange = a.Exchange + ".dlx"
		t.RetryExchange = a.Exchange + ".retry"
	}
	return queue.NewTopology(t)
}

// MySQL locates the database.
type MySQL struct {
	// DSN is SURGE_MYSQL_DSN (or the file SURGE_MYSQL_DSN_FILE), default
	// root@tcp(127.0.0.1:3306)/surge.
	DSN string `envconfig:"MYSQL_DSN" default:"root@tcp(127.0.0.1:3306)/surge" secret:"true"`
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
	// SURGE_IDEMPOTENCY_TTL, default 24h, at least IdempotencyFloor: twice
	// the longest retry horizon the program announces (each program's
	// Validate adds its own to the Retry-After values every gateway sends).
	IdempotencyTTL time.Duration `envconfig:"IDEMPOTENCY_TTL" default:"24h"`
	// OTLPEndpoint is where the gateway and the worker export their traces
	// over OTLP/HTTP: SURGE_OTLP_ENDPOINT (http://collector:4318, or
	// host:port), default none: tracing off (see package telemetry).
	OTLPEndpoint string `envconfig:"OTLP_ENDPOINT"`
}

// MinIdempotencyTTL is the shortest SURGE_IDEMPOTENCY_TTL whatever the
// horizons: per-order states expire in whole seconds.
const MinIdempotencyTTL = time.Second

// Validate rejects settings that parse but cannot work (an idempotency
// TTL below the floor of RetryAfterHorizons), and reads the Redis TLS
// files, so that a missing or bad one stops the program at start.
func (c *Common) Validate() error {
	if err := CheckIdempotencyTTL(c.IdempotencyTTL); err != nil {
		return err
	}
	return c.Redis.loadTLS()
}

// Load fills cfg (a pointer to a struct, usually embedding Common) from
// SURGE_ variables, and the secrets from their files (SURGE_<NAME>_FILE),
// then checks it with its Validate method, when it has one.
func Load(cfg any) error {
	if err := envconfig.Process("surge", cfg); err != nil {
		return fmt.Errorf("read SURGE_ configuration: %w", err)
	}
	if err := readSecretFiles(cfg); err != nil {
		return fmt.Errorf("read SURGE_ configuration: %w", err)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("read SURGE_ configuration: %w", err)
		}
	}
	return nil
}
