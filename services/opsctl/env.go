package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// env holds opsctl's configuration and the clients its commands open on
// demand, so that a command touching only MySQL works while Redis is down.
type env struct {
	cfg   config.Common
	out   io.Writer
	redis *cluster.Client
	db    *store.Store
	mq    *queue.Conn
}

func newEnv(out io.Writer) (*env, error) {
	e := &env{out: out}
	if err := config.Load(&e.cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// Redis returns the cluster client, opened on first use.
func (e *env) Redis(ctx context.Context) (*cluster.Client, error) {
	if e.redis == nil {
		c := cluster.New(e.cfg.Redis.Options())
		if err := c.Ready(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("redis cluster: %w: %w", order.ErrUnavailable, err)
		}
		e.redis = c
	}
	return e.redis, nil
}

// DB returns the MySQL store, opened on first use. A schema older than
// this build's migrations is refused (store.CheckSchema): only migrate,
// which does not come here, runs against it.
func (e *env) DB(ctx context.Context) (*store.Store, error) {
	if e.db == nil {
		db, err := store.Open(ctx, e.cfg.MySQL.DSN, store.Options{MaxOpenConns: 4})
		if err != nil {
			return nil, fmt.Errorf("mysql: %w: %w", order.ErrUnavailable, err)
		}
		if err := store.CheckSchema(ctx, db); err != nil {
			_ = db.Close()
			return nil, err
		}
		e.db = db
	}
	return e.db, nil
}

// AMQP returns the RabbitMQ connection, opened on first use. A broker
// that does not answer within 5s fails with order.ErrUnavailable.
func (e *env) AMQP(ctx context.Context) (*queue.Conn, error) {
	if e.mq == nil {
		mq, err := queue.Dial(ctx, e.cfg.AMQP.URL, queue.DialOptions{Name: "surge-opsctl",
			DialTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, fmt.Errorf("cannot reach RabbitMQ at %s (SURGE_AMQP_URL): %w", brokerAddr(e.cfg.AMQP.URL), err)
		}
		e.mq = mq
	}
	return e.mq, nil
}

// brokerAddr is the host:port of each node of SURGE_AMQP_URL, without the
// credentials.
func brokerAddr(urls string) string {
	var addrs []string
	for _, url := range queue.SplitURLs(urls) {
		u, err := amqp.ParseURI(url)
		if err != nil {
			addrs = append(addrs, "an unparsable URL")
			continue
		}
		addrs = append(addrs, fmt.Sprintf("%s:%d", u.Host, u.Port))
	}
	return strings.Join(addrs, ",")
}

// Stock returns the Redis stock scripts.
func (e *env) Stock(ctx context.Context) (*stock.Stock, error) {
	r, err := e.Redis(ctx)
	if err != nil {
		return nil, err
	}
	return stock.New(r, stock.Options{StateTTL: e.cfg.IdempotencyTTL}), nil
}

func (e *env) close() {
	if e.mq != nil {
		_ = e.mq.Close()
	}
	if e.redis != nil {
		_ = e.redis.Close()
	}
	if e.db != nil {
		_ = e.db.Close()
	}
}

// printJSON writes v indented, for --json output.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONResult prints a report that comes with a failure (err, may be
// nil) as one JSON document, the failure under "error"; the error it
// returns tells report the JSON is already out.
func (e *env) printJSONResult(v any, err error) error {
	if err == nil {
		return e.printJSON(v)
	}
	doc, merr := jsonWithError(v, err)
	if merr != nil {
		return errors.Join(err, merr)
	}
	if perr := e.printJSON(doc); perr != nil {
		return errors.Join(err, perr)
	}
	return reportedError{err}
}
