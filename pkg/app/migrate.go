package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-sql-driver/mysql"

	"surge/pkg/store"
)

// Migrate creates the database named in dsn when it is missing, then
// applies every pending migration and prints the resulting version.
func Migrate(ctx context.Context, dsn string, out io.Writer) error {
	cur, latest, err := ApplyMigrations(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "schema at version %d (latest %d)\n", cur, latest)
	return nil
}

// ApplyMigrations is Migrate without the printing: it returns the
// schema's version afterwards and the newest this build embeds.
func ApplyMigrations(ctx context.Context, dsn string) (current, latest int64, err error) {
	if err := createDatabase(ctx, dsn); err != nil {
		return 0, 0, err
	}
	db, err := store.Open(ctx, dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return 0, 0, err
	}
	return db.MigrationVersion(ctx)
}

func createDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse SURGE_MYSQL_DSN: %w", err)
	}
	name := cfg.DBName
	if name == "" || strings.ContainsAny(name, "`") {
		return fmt.Errorf("SURGE_MYSQL_DSN must name a database")
	}
	cfg.DBName = ""
	db, err := store.Open(ctx, cfg.FormatDSN(), store.Options{MaxOpenConns: 1})
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer db.Close()
	if _, err := db.DB().ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
