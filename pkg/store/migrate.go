package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"

	migrations "surge/sql"
)

// migrateLockTimeoutSec bounds how long Migrate waits for another process
// that is migrating the same database.
const migrateLockTimeoutSec = 300

// Migrate applies every pending migration. Several processes may call it at
// once: a MySQL named lock (GET_LOCK, scoped to the database) lets one
// migrate while the others wait, then find nothing left to do. The lock
// covers the whole run, goose's creation of its version table included
// (goose's own session locker starts after that step).
func (s *Store) Migrate(ctx context.Context) (err error) {
	p, err := s.provider()
	if err != nil {
		return err
	}
	// The lock lives on its own session, outside the pool, so Migrate works
	// whatever MaxOpenConns is (goose needs a pooled connection meanwhile).
	lockDB := sql.OpenDB(s.connector)
	defer lockDB.Close()
	conn, err := lockDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect for the lock: %w", err)
	}
	defer conn.Close()
	if err := lockMigrations(ctx, conn); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, unlockMigrations(context.WithoutCancel(ctx), conn))
	}()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrationVersion returns the schema version applied to the database and
// the newest version this binary embeds (preflight compares them). A
// database never migrated reports 0 and is left untouched.
func (s *Store) MigrationVersion(ctx context.Context) (current, latest int64, err error) {
	p, err := s.provider()
	if err != nil {
		return 0, 0, err
	}
	sources := p.ListSources()
	latest = sources[len(sources)-1].Version
	var tables int
	err = s.db.GetContext(ctx, &tables, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = ?`, goose.DefaultTablename)
	if err != nil {
		return 0, 0, fmt.Errorf("look for the migration table: %w", err)
	}
	if tables == 0 {
		return 0, latest, nil
	}
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read migration version: %w", err)
	}
	return current, latest, nil
}

func (s *Store) provider(opts ...goose.ProviderOption) (*goose.Provider, error) {
	opts = append(opts, goose.WithLogger(goose.NopLogger()), goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(goose.DialectMySQL, s.db.DB, migrations.FS, opts...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// lockName is the database's migration lock. GET_LOCK names are server
// wide, so it carries the database name.
const lockName = "CONCAT('surge.migrate.', DATABASE())"

// lockMigrations waits for the database's migration lock on conn. The lock
// dies with the session, so a crashed migrator never blocks the next one.
func lockMigrations(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", migrateLockTimeoutSec).Scan(&got)
	if err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return errors.New("take migration lock: timed out waiting for another migrator")
	}
	return nil
}

// unlockMigrations releases the lock taken by lockMigrations on conn.
func unlockMigrations(ctx context.Context, conn *sql.Conn) error {
	var released sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK("+lockName+")").Scan(&released)
	if err != nil {
		return fmt.Errorf("release migration lock: %w", err)
	}
	return nil
}
