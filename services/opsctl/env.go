package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"surge/pkg/cluster"
	"surge/pkg/config"
	"surge/pkg/order"
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

// DB returns the MySQL store, opened on first use.
func (e *env) DB(ctx context.Context) (*store.Store, error) {
	if e.db == nil {
		db, err := store.Open(ctx, e.cfg.MySQL.DSN, store.Options{MaxOpenConns: 4})
		if err != nil {
			return nil, fmt.Errorf("mysql: %w: %w", order.ErrUnavailable, err)
		}
		e.db = db
	}
	return e.db, nil
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
