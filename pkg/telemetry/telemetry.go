// Package telemetry is surge's tracing: OpenTelemetry spans across the
// gateway (the HTTP request, the Redis admit and reserve scripts, the
// RabbitMQ publish), the message (W3C trace context in its AMQP headers)
// and the worker (the consume, the order's lock, the MySQL transaction,
// the Redis commit and release scripts), exported over OTLP/HTTP when
// SURGE_OTLP_ENDPOINT is set. The order path's spans come from
// GatewayObserver and WorkerObserver, the observers pkg/gateway and
// pkg/worker declare.
//
// Off (no endpoint), a Tracing is the no-op provider and Enabled is false;
// the services then install neither observer, so the order path is
// exactly what it is without tracing: no span, no context, no allocation.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName names surge's tracer (the instrumentation scope of its spans).
const ScopeName = "surge"

// Options configures Setup.
type Options struct {
	// Endpoint is SURGE_OTLP_ENDPOINT: the OTLP/HTTP receiver, as a URL
	// (http://collector:4318, https://…; a URL with no path gets the
	// standard /v1/traces) or host:port (plain HTTP). Empty: tracing off.
	Endpoint string
	// Service is the service.name of the spans ("surge-gateway", …).
	Service string
	// Version is the service.version (the build's), optional.
	Version string
	// Provider, when set, is used instead of an exporter (tests record
	// spans with it); Shutdown then leaves it to its owner.
	Provider trace.TracerProvider
}

// Tracing is one service's tracer and the propagator that carries its
// context in message headers. Safe for concurrent use.
type Tracing struct {
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	enabled bool
	// sdk is the provider Setup built and owns (nil otherwise).
	sdk *sdktrace.TracerProvider
}

// Off is tracing turned off: the no-op provider.
func Off() *Tracing {
	return &Tracing{tracer: noop.NewTracerProvider().Tracer(ScopeName), prop: propagation.TraceContext{}}
}

// Setup builds the service's tracing from opts: off without an endpoint
// or a provider, else spans batched to the OTLP/HTTP endpoint. Sampling
// follows the SDK's standard variables (OTEL_TRACES_SAMPLER, e.g.
// parentbased_traceidratio with OTEL_TRACES_SAMPLER_ARG=0.01); every trace
// is sampled by default.
func Setup(ctx context.Context, opts Options) (*Tracing, error) {
	if opts.Provider != nil {
		return &Tracing{tracer: opts.Provider.Tracer(ScopeName), prop: propagation.TraceContext{}, enabled: true}, nil
	}
	if opts.Endpoint == "" {
		return Off(), nil
	}
	exp, err := otlptracehttp.New(ctx, endpointOption(opts.Endpoint)...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", opts.Endpoint, err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", opts.Service)}
	if opts.Version != "" {
		attrs = append(attrs, attribute.String("service.version", opts.Version))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.NewSchemaless(attrs...)))
	return &Tracing{tracer: tp.Tracer(ScopeName), prop: propagation.TraceContext{}, enabled: true, sdk: tp}, nil
}

// endpointOption turns SURGE_OTLP_ENDPOINT into the exporter's options.
func endpointOption(endpoint string) []otlptracehttp.Option {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		// host:port
		return []otlptracehttp.Option{otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure()}
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
}

// Enabled tells whether spans are made: false when off, and then the
// services install no tracing observer.
func (t *Tracing) Enabled() bool { return t != nil && t.enabled }

// Exporting tells whether Setup built an OTLP exporter.
func (t *Tracing) Exporting() bool { return t != nil && t.sdk != nil }

// Tracer is the service's tracer (the no-op one when off).
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Shutdown exports the spans still buffered, within ctx, and stops the
// exporter Setup built; nothing when off or given a provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ShutdownWithin is Shutdown bounded by d.
func (t *Tracing) ShutdownWithin(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return t.Shutdown(ctx)
}

// start opens a span of kind under ctx's.
func (t *Tracing) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// end closes span, recording err as its error unless it is one of the
// answers named in ok (a sold-out answer is no failure).
func end(span trace.Span, err error, ok ...error) {
	if err != nil {
		answer := false
		for _, o := range ok {
			answer = answer || errors.Is(err, o)
		}
		if answer {
			span.SetAttributes(attribute.String("surge.answer", err.Error()))
		} else {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
