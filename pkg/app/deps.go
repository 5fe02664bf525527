// Package app assembles surge's programs from their packages: it opens the
// engines, wires the handlers, runs them and shuts them down in a
// documented order. The services' mains only read configuration and call
// it; tests call it too, with their own names and ":0" ports.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/stock"
	"surge/pkg/store"
)

// engines are the clients a service holds. close shuts them in reverse
// order of opening.
type engines struct {
	redis *cluster.Client
	// fast is redis's handle for the per-order commands: its
	// autopipeliner unless SURGE_REDIS_AUTOPIPELINE=false.
	fast redis.Cmdable
	mq   *queue.Conn
	db   *store.Store
}

// needs says what a service asks of the engines beyond a connection to
// each. The zero value is the gateway's and the worker's: the broker must
// answer and the order topology is declared.
type needs struct {
	// brokerOptional leaves mq nil, with a warning, when RabbitMQ cannot
	// be reached (a one-off reconcile still repairs without it).
	brokerOptional bool
	// noDeclare skips declaring the topology (the reconciler only
	// publishes to the exchange; its user may configure nothing).
	noDeclare bool
}

// openEngines is the one opener of every daemon's engines: the Redis
// Cluster with the scripts loaded and its autopipeliner, MySQL with the
// configured pool and a schema no older than this build's
// (store.CheckSchema), RabbitMQ named after the service.
func openEngines(ctx context.Context, c config.Common, name string, log *slog.Logger, n needs) (*engines, error) {
	e := &engines{}
	e.redis = cluster.New(c.Redis.Options())
	// A master down or cut off at start (its slots failing over) must not
	// keep a restarted gateway or worker down with it.
	skipped, err := stock.LoadScriptsReachable(ctx, e.redis.ClusterClient)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("redis cluster: %w", err)
	}
	if len(skipped) > 0 {
		log.Warn("redis masters unreachable at start: their scripts load at first use", "masters", skipped)
	}
	fast, err := e.redis.Batched()
	if err != nil {
		e.close()
		return nil, err
	}
	e.fast = fast
	db, err := store.Open(ctx, c.MySQL.DSN, store.Options{MaxOpenConns: c.MySQL.MaxConns, MaxIdleConns: c.MySQL.MaxConns})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	e.db = db
	// A schema older than this build's migrations would fail on a missing
	// table or column mid-sale: refuse to start instead.
	if err := store.CheckSchema(ctx, db); err != nil {
		e.close()
		return nil, err
	}
	mq, err := queue.Dial(ctx, c.AMQP.URL, queue.DialOptions{Name: "surge-" + name, Logger: log})
	switch {
	case err != nil && n.brokerOptional:
		log.Warn("rabbitmq unreachable: going on without it", "err", err)
		return e, nil
	case err != nil:
		e.close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	e.mq = mq
	if n.noDeclare {
		return e, nil
	}
	if err := c.AMQP.Topology().DeclareOn(mq, log); err != nil {
		e.close()
		return nil, fmt.Errorf("declare topology: %w", err)
	}
	return e, nil
}

func (e *engines) close() {
	if e.mq != nil {
		_ = e.mq.Close()
	}
	if e.db != nil {
		_ = e.db.Close()
	}
	if e.redis != nil {
		_ = e.redis.Close()
	}
}

// NewLogger returns the JSON logger every service uses, at level (debug,
// info, warn, error).
func NewLogger(level, service string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})).With("service", service)
}

// catalog answers gateway.Catalog from MySQL.
type catalog struct{ db *store.Store }

func (c catalog) Exists(ctx context.Context, sku string) (bool, error) {
	_, err := c.db.Product(ctx, sku)
	if errors.Is(err, order.ErrUnknownSKU) {
		return false, nil
	}
	return err == nil, err
}

// ledger answers gateway.Ledger from MySQL.
type ledger struct{ db *store.Store }

func (l ledger) FinalOrder(ctx context.Context, id string) (gateway.OrderView, error) {
	r, err := l.db.Order(ctx, id)
	if err != nil {
		return gateway.OrderView{}, err
	}
	return gateway.OrderView{OrderID: r.ID, Status: order.Status(r.Status), SKU: r.SKU, Qty: r.Qty,
		Reason: r.Reason, InvoiceID: r.InvoiceID, CustomerID: r.CustomerID}, nil
}

var (
	_ gateway.Catalog = catalog{}
	_ gateway.Ledger  = ledger{}
)
