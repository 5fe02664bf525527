// Package store is surge's MySQL adapter: the schema's migrations, product
// stock, and the worker's transaction that turns an order into an invoice
// without ever selling more than the stock (sold <= stock is guarded by the
// UPDATE itself and by a CHECK constraint).
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// Options tunes the connection pool. The zero value means the defaults.
type Options struct {
	// MaxOpenConns caps open connections. Default 50.
	MaxOpenConns int
	// MaxIdleConns caps idle connections kept for reuse. Default 50.
	MaxIdleConns int
	// ConnMaxLifetime recycles connections after this long, so a failover
	// or a load balancer change is picked up. Default 5m.
	ConnMaxLifetime time.Duration
	// IdleWriteTxTimeout has the server end a session that sits this long
	// inside a write transaction without a statement. A worker whose host
	// is lost (or whose link is cut) between its stock UPDATE and its
	// COMMIT leaves such a session behind, and the server only notices
	// after wait_timeout (8 h): meanwhile its row lock on the product
	// blocks every other worker's orders of that SKU. Default 10s, far
	// above the milliseconds between two statements of a live worker;
	// negative leaves the server's setting. Applied where the server has
	// idle_write_transaction_timeout (MariaDB 10.3 and later).
	IdleWriteTxTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 50
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = 50
	}
	if o.ConnMaxLifetime <= 0 {
		o.ConnMaxLifetime = 5 * time.Minute
	}
	if o.IdleWriteTxTimeout == 0 {
		o.IdleWriteTxTimeout = 10 * time.Second
	}
}

// idleTxVar is MariaDB's session variable behind Options.IdleWriteTxTimeout.
const idleTxVar = "idle_write_transaction_timeout"

// Store reads and writes surge's MySQL tables. It is safe for concurrent
// use.
type Store struct {
	db *sqlx.DB
	// connector dials sessions outside the pool (the migration lock).
	connector driver.Connector
}

// Open connects to dsn (go-sql-driver format) and pings it. It forces
// parseTime=true, and interpolateParams=true so that each statement is one
// round trip instead of prepare, execute and close.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	opts.setDefaults()
	s, err := open(ctx, cfg, opts)
	if err != nil || opts.IdleWriteTxTimeout < 0 || cfg.Params[idleTxVar] != "" {
		return s, err
	}
	// Every session of the pool gets the timeout (the driver sets DSN
	// parameters at connect), where the server knows the variable.
	var cur sql.NullString
	if s.db.QueryRowContext(ctx, "SELECT @@SESSION."+idleTxVar).Scan(&cur) != nil {
		return s, nil // MySQL: no such variable
	}
	_ = s.Close()
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[idleTxVar] = strconv.Itoa(max(1, int(opts.IdleWriteTxTimeout.Round(time.Second)/time.Second)))
	return open(ctx, cfg, opts)
}

func open(ctx context.Context, cfg *mysql.Config, opts Options) (*Store, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("build mysql connector: %w", err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	db.SetMaxOpenConns(opts.MaxOpenConns)
	db.SetMaxIdleConns(opts.MaxIdleConns)
	db.SetConnMaxLifetime(opts.ConnMaxLifetime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ping mysql %s/%s: %w", cfg.Addr, cfg.DBName, err)
	}
	return &Store{db: db, connector: connector}, nil
}

// Ping checks that MySQL answers (readiness probes).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping mysql: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error { return s.db.Close() }

// DB exposes the pool for code that needs a query the Store does not offer
// (tests, the reconciler's reports).
func (s *Store) DB() *sqlx.DB { return s.db }
