package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"surge/pkg/gateway"
	"surge/pkg/order"
)

// TestOffMakesNothing: without an endpoint, tracing is off: no exporter,
// Enabled false (the services install no tracing observer), no headers.
func TestOffMakesNothing(t *testing.T) {
	tel, err := Setup(context.Background(), Options{Service: "surge-test"})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() || tel.Exporting() {
		t.Fatalf("off: enabled %v, exporting %v", tel.Enabled(), tel.Exporting())
	}
	ctx, span := tel.Tracer().Start(context.Background(), "x")
	defer span.End()
	if span.SpanContext().IsValid() || tel.Headers(ctx) != nil {
		t.Fatal("the no-op tracer made a real span or headers")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestExportsOverOTLPHTTP: with SURGE_OTLP_ENDPOINT set, spans reach an
// OTLP/HTTP receiver (here an in-process one decoding the protobuf
// request) at /v1/traces, with the service's name, and the trace context
// goes into AMQP headers as a W3C traceparent.
func TestExportsOverOTLPHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			t.Errorf("receiver got %s %s", r.Method, r.URL.Path)
		}
		body, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			t.Errorf("decode export: %v", err)
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()

	for _, endpoint := range []string{srv.URL, srv.Listener.Addr().String()} {
		mu.Lock()
		got = nil
		mu.Unlock()
		tel, err := Setup(context.Background(), Options{Endpoint: endpoint, Service: "surge-test"})
		if err != nil {
			t.Fatal(err)
		}
		if !tel.Enabled() || !tel.Exporting() {
			t.Fatalf("%s: enabled %v, exporting %v", endpoint, tel.Enabled(), tel.Exporting())
		}
		obs := GatewayObserver{T: tel, Exchange: "orders"}
		ctx, span := tel.Tracer().Start(context.Background(), "POST /v1/orders")
		o := order.Order{ID: "o_1", SKU: "s", Qty: 1}
		obs.End(obs.Begin(ctx, gateway.StepPublish, o), gateway.StepPublish, o, gateway.Result{})
		h := tel.Headers(ctx)
		tp, _ := h["traceparent"].(string)
		want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
		if tp != want {
			t.Errorf("traceparent %q, want %q", tp, want)
		}
		span.End()
		if err := tel.ShutdownWithin(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		names := map[string]bool{}
		service := ""
		for _, req := range got {
			for _, rs := range req.GetResourceSpans() {
				for _, kv := range rs.GetResource().GetAttributes() {
					if kv.GetKey() == "service.name" {
						service = kv.GetValue().GetStringValue()
					}
				}
				for _, ss := range rs.GetScopeSpans() {
					for _, s := range ss.GetSpans() {
						names[s.GetName()] = true
					}
				}
			}
		}
		mu.Unlock()
		if !names["POST /v1/orders"] || !names["orders publish"] || service != "surge-test" {
			t.Errorf("%s: the receiver got spans %v of service %q", endpoint, names, service)
		}
	}
}

// TestHeaderCarrier: the carrier reads and writes AMQP headers, ignoring
// values that are not strings.
func TestHeaderCarrier(t *testing.T) {
	h := amqp.Table{"x-surge-attempts": int32(2)}
	c := HeaderCarrier(h)
	c.Set("traceparent", "v")
	if c.Get("traceparent") != "v" || c.Get("x-surge-attempts") != "" || len(c.Keys()) != 2 {
		t.Fatalf("carrier over %v: get %q, keys %v", h, c.Get("traceparent"), c.Keys())
	}
}
