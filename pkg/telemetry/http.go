package telemetry

import (
	"surge/pkg/httpstatus"

	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/reqid"
)

// HTTP wraps next, a handler that routes with http.ServeMux (or wraps
// one), in a server span per request, named by the route that matched
// ("POST /v1/orders"); it carries the request id. Place it inside
// httpapi.RequestIDs and outside the mux, so that the route is known once
// next returns. A traceparent the client sends is not followed: the trace
// starts at the gateway.
func (t *Tracing) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := t.tracer.Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot(),
			trace.WithAttributes(attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path), attribute.String("surge.request_id", reqid.From(r.Context()))))
		defer span.End()
		sw := httpstatus.Wrap(w)
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.Status))
		if sw.Status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.Status))
		}
	})
}
