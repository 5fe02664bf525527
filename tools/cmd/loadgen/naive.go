package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"surge/pkg/httpapi"
	"surge/pkg/store"
	"surge/tools/naivesql"
)

// naiveServer serves the naive SQL baseline on -addr until ctx ends.
func naiveServer(ctx context.Context, cfg loadgenConfig, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen naive-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18090", "listen address")
	conns := fs.Int("conns", cfg.MySQL.MaxConns, "MySQL connections (default SURGE_MYSQL_MAX_CONNS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.MySQL.DSN, store.Options{MaxOpenConns: *conns, MaxIdleConns: *conns})
	if err != nil {
		return err
	}
	defer db.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "naive-sql", "conns", *conns)
	srv := httpapi.NewHTTPServer(*addr, (&naivesql.Server{DB: db.DB().DB, Log: log}).Handler())
	return serve(ctx, srv, log, "naive SQL server")
}
