package telemetry

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/worker"
)

// recording is tracing into a span recorder.
func recording(t *testing.T) (*Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel, err := Setup(context.Background(), Options{Provider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return tel, rec
}

// spanWant is what one step's span must be.
type spanWant struct {
	name  string
	kind  trace.SpanKind
	attrs map[string]string // attribute -> value as Emit prints it
	error bool              // status Error, else an answer or no error
}

// checkSpan runs one step between begin and end under a parent span and
// checks the one span it made: its name, kind, parent, attributes and
// status, and that the parent is still open.
func checkSpan(t *testing.T, tel *Tracing, rec *tracetest.SpanRecorder, label string, want spanWant,
	step func(ctx context.Context) context.Context, end func(ctx context.Context)) {
	t.Helper()
	before := len(rec.Ended())
	ctx, parent := tel.Tracer().Start(context.Background(), "parent")
	sctx := step(ctx)
	end(sctx)
	ended := rec.Ended()[before:]
	if len(ended) != 1 {
		t.Fatalf("%s: %d spans ended, want 1 (the parent stays open)", label, len(ended))
	}
	parent.End()
	s := ended[0]
	if s.Name() != want.name || s.SpanKind() != want.kind || s.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("%s: span %q kind %v parent %v, want %q kind %v under the parent", label, s.Name(), s.SpanKind(),
			s.Parent().SpanID(), want.name, want.kind)
	}
	got := map[string]string{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range want.attrs {
		if got[k] != v {
			t.Errorf("%s: attribute %s = %q, want %q (all: %v)", label, k, got[k], v, got)
		}
	}
	if isErr := s.Status().Code == codes.Error; isErr != want.error {
		t.Errorf("%s: span status %v, want error %v", label, s.Status(), want.error)
	}
}

var errIO = errors.New("i/o timeout")

func attrs(kv ...attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

// TestGatewayObserverSpans: each gateway step is one span under the
// request's, with its name, kind and attributes; the answers a buyer is
// given (rate limited, another body, sold out) are no span error, a
// failing engine is.
func TestGatewayObserverSpans(t *testing.T) {
	tel, rec := recording(t)
	obs := GatewayObserver{T: tel, Exchange: "orders"}
	o := order.Order{ID: "o_1", SKU: "mug", Qty: 2, CustomerID: "alice"}
	redis := func(script string, more ...attribute.KeyValue) map[string]string {
		return attrs(append([]attribute.KeyValue{attribute.String("db.system.name", "redis"),
			attribute.String("db.operation.name", "EVALSHA "+script), attribute.String("surge.sku", "mug"),
			attribute.Int("surge.qty", 2)}, more...)...)
	}
	cases := []struct {
		label string
		step  gateway.Step
		r     gateway.Result
		want  spanWant
	}{
		{"claim", gateway.StepClaim, gateway.Result{Claim: order.Claim{OrderID: "o_1", Created: true}},
			spanWant{"redis admit", trace.SpanKindClient, redis("admit", attribute.String("surge.order_id", "o_1"),
				attribute.Bool("surge.claim.created", true)), false}},
		{"claim limited", gateway.StepClaim, gateway.Result{Err: &order.RateLimitedError{}},
			spanWant{"redis admit", trace.SpanKindClient, redis("admit"), false}},
		{"claim mismatch", gateway.StepClaim, gateway.Result{Err: order.ErrIdempotencyMismatch},
			spanWant{"redis admit", trace.SpanKindClient, redis("admit"), false}},
		{"claim failed", gateway.StepClaim, gateway.Result{Err: errIO},
			spanWant{"redis admit", trace.SpanKindClient, redis("admit"), true}},
		{"reserve", gateway.StepReserve, gateway.Result{Reservation: order.Reservation{Avail: 7}},
			spanWant{"redis reserve", trace.SpanKindClient, redis("reserve", attribute.Bool("surge.reservation.repeat", false),
				attribute.Int("surge.available", 7)), false}},
		{"reserve sold out", gateway.StepReserve, gateway.Result{Err: fmt.Errorf("x: %w", order.ErrSoldOut)},
			spanWant{"redis reserve", trace.SpanKindClient, redis("reserve"), false}},
		{"reserve failed", gateway.StepReserve, gateway.Result{Err: errIO},
			spanWant{"redis reserve", trace.SpanKindClient, redis("reserve"), true}},
		{"reserve retry", gateway.StepReserveRetry, gateway.Result{Reservation: order.Reservation{Repeat: true}},
			spanWant{"redis reserve", trace.SpanKindClient, redis("reserve", attribute.Bool("surge.retry", true),
				attribute.Bool("surge.reservation.repeat", true)), false}},
		{"undo", gateway.StepUndo, gateway.Result{Err: order.ErrNotYours},
			spanWant{"redis undo", trace.SpanKindClient, attrs(attribute.String("db.system.name", "redis"),
				attribute.String("surge.sku", "mug"), attribute.String("surge.order_id", "o_1")), true}},
		{"publish", gateway.StepPublish, gateway.Result{},
			spanWant{"orders publish", trace.SpanKindProducer, attrs(attribute.String("messaging.system", "rabbitmq"),
				attribute.String("messaging.operation.type", "send"), attribute.String("messaging.destination.name", "orders"),
				attribute.String("messaging.message.id", "o_1"), attribute.String("surge.sku", "mug")), false}},
		{"publish failed", gateway.StepPublish, gateway.Result{Err: order.ErrUnavailable},
			spanWant{"orders publish", trace.SpanKindProducer, nil, true}},
	}
	for _, c := range cases {
		checkSpan(t, tel, rec, c.label, c.want,
			func(ctx context.Context) context.Context { return obs.Begin(ctx, c.step, o) },
			func(ctx context.Context) { obs.End(ctx, c.step, o, c.r) })
	}
}

// TestWorkerObserverSpans: each worker step is one span under the
// consume span, with its name and attributes, and a failing step's span
// is an error.
func TestWorkerObserverSpans(t *testing.T) {
	tel, rec := recording(t)
	obs := WorkerObserver{T: tel}
	o := order.Order{ID: "o_1", SKU: "mug", Qty: 2, CustomerID: "alice"}
	settle := func(script string, more ...attribute.KeyValue) map[string]string {
		return attrs(append([]attribute.KeyValue{attribute.String("db.system.name", "redis"),
			attribute.String("db.operation.name", "EVALSHA "+script), attribute.String("surge.sku", "mug"),
			attribute.String("surge.order_id", "o_1")}, more...)...)
	}
	cases := []struct {
		label string
		step  worker.Step
		r     worker.Result
		want  spanWant
	}{
		{"lock", worker.StepLock, worker.Result{Fence: 42}, spanWant{"lock", trace.SpanKindClient,
			attrs(attribute.String("db.system.name", "redis"), attribute.String("surge.lock", "order:o_1"),
				attribute.Int64("surge.fence", 42)), false}},
		{"lock busy", worker.StepLock, worker.Result{Err: errIO}, spanWant{"lock", trace.SpanKindClient, nil, true}},
		{"ledger", worker.StepLedger, worker.Result{Processed: order.Processed{Status: order.StatusInvoiced, Duplicate: true}},
			spanWant{"mysql order", trace.SpanKindClient, attrs(attribute.String("db.system.name", "mysql"),
				attribute.String("surge.order_id", "o_1"), attribute.String("surge.sku", "mug"), attribute.Int("surge.qty", 2),
				attribute.String("surge.status", "invoiced"), attribute.Bool("surge.duplicate", true)), false}},
		{"ledger failed", worker.StepLedger, worker.Result{Err: errIO}, spanWant{"mysql order", trace.SpanKindClient, nil, true}},
		{"commit", worker.StepCommit, worker.Result{Commit: order.CommittedFromAvail},
			spanWant{"redis commit", trace.SpanKindClient, settle("commit", attribute.Int("surge.commit.outcome", 2)), false}},
		{"release", worker.StepRelease, worker.Result{}, spanWant{"redis release", trace.SpanKindClient, settle("release"), false}},
		{"release failed", worker.StepRelease, worker.Result{Err: errIO}, spanWant{"redis release", trace.SpanKindClient, nil, true}},
	}
	for _, c := range cases {
		checkSpan(t, tel, rec, c.label, c.want,
			func(ctx context.Context) context.Context { return obs.Begin(ctx, c.step, o) },
			func(ctx context.Context) { obs.End(ctx, c.step, o, c.r) })
	}
}
