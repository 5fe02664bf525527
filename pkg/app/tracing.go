package app

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/telemetry"
)

// Tracing selects a service's tracing: SURGE_OTLP_ENDPOINT (in
// config.Common) exports it; Provider, set by tests, records it instead.
// Neither: off, and the order path carries no tracing code at all.
type Tracing struct {
	// Provider, when set, makes the spans (a test's recorder); it wins
	// over SURGE_OTLP_ENDPOINT.
	Provider trace.TracerProvider `ignored:"true"`
}

// setupTracing is the one place a service's tracing is set up. When it
// exports, the exporter's failures (a collector down) are logged on log,
// as warnings, instead of the standard logger.
func setupTracing(ctx context.Context, endpoint string, t Tracing, service string, log *slog.Logger) (*telemetry.Tracing, error) {
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{Endpoint: endpoint, Service: service, Version: version, Provider: t.Provider})
	if err == nil && tel.Exporting() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
		log.Info("exporting traces", "endpoint", endpoint)
	}
	return tel, err
}

// tracingShutdownTimeout bounds the export of the last spans at shutdown.
const tracingShutdownTimeout = 5 * time.Second
