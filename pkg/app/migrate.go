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
	if err := createDatabase(ctx, dsn); err != nil {
		return err
	}
	db, err := store.Open(ctx, dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	cur, latest, err := db.MigrationVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "schema at version %d (latest %d)\n", cur, latest)
	return nil
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
