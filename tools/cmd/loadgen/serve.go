package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// serve runs srv until it fails or ctx ends, then shuts it down, giving
// the requests in flight five seconds. what names the server in errors.
func serve(ctx context.Context, srv *http.Server, log *slog.Logger, what string) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info(what+" listening", "addr", srv.Addr)
	var err error
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
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
