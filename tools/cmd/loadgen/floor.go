package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"surge/pkg/httpapi"
	"surge/tools/floor"
)

// floorServer serves the sold-out floor on -addr until ctx ends: the
// gateway's order decoding and sold-out answer, no engine.
func floorServer(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen floor-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18091", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("service", "floor")
	return serve(ctx, httpapi.NewHTTPServer(*addr, floor.Handler()), log, "floor server")
}
