package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

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
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "naive-sql")
	srv := httpapi.NewHTTPServer(*addr, (&naivesql.Server{DB: db.DB().DB, Log: log}).Handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("naive SQL server listening", "addr", *addr, "conns", *conns)
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("naive server: %w", err)
	}
	return nil
}
