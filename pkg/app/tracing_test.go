package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"surge/internal/testkit"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"surge/internal/apitest"
	"surge/internal/apptest"
	"surge/internal/testenv"
	"surge/pkg/app"
	"surge/pkg/order"
)

// recorder is a tracer provider whose spans a test reads back.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return tp, rec
}

// spanNamed returns the ended span called name, failing t when there is
// not exactly one.
func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("want one span %q, have %d among %q", name, len(found), names)
	}
	return found[0]
}

// TestOneOrderIsOneTrace: a gateway and a worker, each with its own tracer
// provider (as two processes have), on the real engines. One order's spans
// form one trace: the gateway's HTTP span is its root, the Redis admit and
// reserve scripts and the publish are its children, the worker's consume
// span continues the trace from the message's traceparent header with the
// publish span as its parent, and the lock, the MySQL transaction and the
// Redis commit script are the consume span's children.
func TestOneOrderIsOneTrace(t *testing.T) {
	c := apptest.Common(t)
	gtp, grec := recorder(t)
	wtp, wrec := recorder(t)
	gcfg := apptest.GatewayConfig(t, c, "test-token")
	gcfg.Tracing.Provider = gtp
	url, g := apptest.Gateway(t, gcfg, quietLog())
	wcfg := apptest.WorkerConfig(t, c)
	wcfg.Tracing.Provider = wtp
	apptest.Worker(t, wcfg, quietLog())

	sku := testenv.Unique("traced-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	apptest.PutStock(t, apitest.Client(t), apptest.AdminURL(g), "test-token", sku, 5, "Traced item", 500)
	a := post(t, apitest.Client(t), url, "trace-1", orderBody(sku, 1, testenv.Unique("tracy-")))
	if a.Status != 202 {
		t.Fatalf("order answered %d %+v", a.Status, a)
	}
	testkit.WaitFor(t, "the order invoiced", 15*time.Second, func() (bool, error) {
		g := get(t, url+"/v1/orders/"+a.OrderID)
		return g.State == string(order.StatusInvoiced), nil
	})
	queueName := c.AMQP.Topology().Queue
	consumeName := "process " + queueName
	testkit.WaitFor(t, "the worker's consume span to end", 10*time.Second, func() (bool, error) {
		for _, s := range wrec.Ended() {
			if s.Name() == consumeName {
				return true, nil
			}
		}
		return false, nil
	})

	var gspans []sdktrace.ReadOnlySpan
	var root sdktrace.ReadOnlySpan
	for _, s := range grec.Ended() {
		if s.Name() == "POST /v1/orders" {
			root = s
		}
	}
	if root == nil {
		t.Fatal("no span for POST /v1/orders")
	}
	for _, s := range grec.Ended() {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
			gspans = append(gspans, s)
		}
	}
	if root.SpanKind() != trace.SpanKindServer || root.Parent().IsValid() {
		t.Errorf("POST /v1/orders: kind %v, parent %v: want a server span at the root", root.SpanKind(), root.Parent())
	}
	traceID := root.SpanContext().TraceID()
	publish := spanNamed(t, gspans, c.AMQP.Topology().Exchange+" publish")
	for _, name := range []string{"redis admit", "redis reserve", publish.Name()} {
		s := spanNamed(t, gspans, name)
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("gateway span %q: parent %v, want the HTTP span %v", name, s.Parent().SpanID(), root.SpanContext().SpanID())
		}
	}
	if publish.SpanKind() != trace.SpanKindProducer {
		t.Errorf("publish span kind %v, want producer", publish.SpanKind())
	}

	wspans := wrec.Ended()
	consume := spanNamed(t, wspans, consumeName)
	if got := consume.SpanContext().TraceID(); got != traceID {
		t.Fatalf("the worker's consume span is in trace %v, the gateway's spans in %v", got, traceID)
	}
	if consume.Parent().SpanID() != publish.SpanContext().SpanID() || !consume.Parent().IsRemote() {
		t.Errorf("consume span's parent %v (remote %v), want the gateway's publish span %v",
			consume.Parent().SpanID(), consume.Parent().IsRemote(), publish.SpanContext().SpanID())
	}
	if consume.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("consume span kind %v, want consumer", consume.SpanKind())
	}
	for _, name := range []string{"lock", "mysql order", "redis commit"} {
		s := spanNamed(t, wspans, name)
		if s.SpanContext().TraceID() != traceID || s.Parent().SpanID() != consume.SpanContext().SpanID() {
			t.Errorf("worker span %q: trace %v parent %v, want trace %v under the consume span %v", name,
				s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, consume.SpanContext().SpanID())
		}
	}
	for _, s := range append(gspans, wspans...) {
		if s.Status().Code.String() == "Error" {
			t.Errorf("span %q ended with an error: %s", s.Name(), s.Status().Description)
		}
	}
	t.Logf("trace %v: gateway %d spans, worker %d spans", traceID, len(gspans), len(wspans))
}

// otlpReceiver is an in-process OTLP/HTTP receiver: it decodes each
// export request and keeps the names of the spans by service.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]string // service.name -> span names
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	exp := &coltracepb.ExportTraceServiceRequest{}
	if req.URL.Path != "/v1/traces" || proto.Unmarshal(body, exp) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range exp.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans[service] = append(r.spans[service], s.GetName())
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestTracesExportedWhenEndpointSet: SURGE_OTLP_ENDPOINT, read like every
// SURGE_ variable, makes the gateway export its spans over OTLP/HTTP; they
// reach the receiver by the time the gateway has shut down.
func TestTracesExportedWhenEndpointSet(t *testing.T) {
	recv := &otlpReceiver{spans: map[string][]string{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("SURGE_OTLP_ENDPOINT", srv.URL)
	c := apptest.Common(t)
	if c.OTLPEndpoint != srv.URL {
		t.Fatalf("SURGE_OTLP_ENDPOINT read as %q", c.OTLPEndpoint)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gcfg := apptest.GatewayConfig(t, c, "test-token")
	gcfg.HTTPAddr, gcfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	g, err := app.NewGateway(ctx, gcfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	url := "http://" + g.Addr()
	sku := testenv.Unique("otlp-")
	testenv.CleanupSKU(t, testenv.Redis(t), sku)
	apptest.PutStock(t, apitest.Client(t), "http://"+g.AdminAddr(), "test-token", sku, 5, "Exported item", 500)
	if a := post(t, apitest.Client(t), url, "otlp-1", orderBody(sku, 1, testenv.Unique("otlp-"))); a.Status != http.StatusAccepted {
		t.Fatalf("order answered %d %+v", a.Status, a)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	got := strings.Join(recv.spans["surge-gateway"], ",")
	// Only the public listener is traced: the stock load on the admin one is not.
	for _, want := range []string{"POST /v1/orders", "redis admit", "redis reserve", c.AMQP.Topology().Exchange + " publish"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("the receiver has no span %q from surge-gateway: %v", want, recv.spans)
		}
	}
}
