package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"surge/pkg/gateway"
	"surge/pkg/order"
	"surge/pkg/worker"
)

// sample returns the value of the series name{labels} in Registry: a
// counter's or gauge's value, or a histogram's sample count. Missing
// series read as -1.
func sample(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				return value(m)
			}
		}
	}
	return -1
}

func matches(m *dto.Metric, labels map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	if len(got) != len(labels) {
		return false
	}
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func TestMiddlewareLabelsByRoutePattern(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such order", http.StatusNotFound)
	})
	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "{}") // implicit 200
	})
	srv := httptest.NewServer(Middleware(mux))
	defer srv.Close()

	byID := map[string]string{"route": "GET /v1/orders/{id}", "method": "GET", "status": "404"}
	posted := map[string]string{"route": "POST /v1/orders", "method": "POST", "status": "200"}
	unmatched := map[string]string{"route": "unmatched", "method": "GET", "status": "404"}
	before := []float64{sample(t, "surge_http_request_duration_seconds", byID),
		sample(t, "surge_http_request_duration_seconds", posted),
		sample(t, "surge_http_request_duration_seconds", unmatched)}

	for _, id := range []string{"o_1", "o_2", "o_3"} {
		get(t, srv.URL+"/v1/orders/"+id)
	}
	resp, err := http.Post(srv.URL+"/v1/orders", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	get(t, srv.URL+"/nowhere")

	after := []float64{sample(t, "surge_http_request_duration_seconds", byID),
		sample(t, "surge_http_request_duration_seconds", posted),
		sample(t, "surge_http_request_duration_seconds", unmatched)}
	want := []float64{3, 1, 1}
	for i := range want {
		if d := after[i] - max(before[i], 0); d != want[i] {
			t.Errorf("series %d grew by %v, want %v (ids must not become labels)", i, d, want[i])
		}
	}
}

// TestMiddlewareBoundsMethods: methods are client input; made-up ones
// share one series instead of creating one each.
func TestMiddlewareBoundsMethods(t *testing.T) {
	srv := httptest.NewServer(Middleware(http.NewServeMux()))
	defer srv.Close()
	other := map[string]string{"route": "unmatched", "method": "other", "status": "404"}
	before := max(sample(t, "surge_http_request_duration_seconds", other), 0)
	for i := range 5 {
		req, _ := http.NewRequest(fmt.Sprintf("MADEUP%d", i), srv.URL+"/x", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := sample(t, "surge_http_request_duration_seconds",
			map[string]string{"route": "unmatched", "method": req.Method, "status": "404"}); n > 0 {
			t.Fatalf("method %s became a label", req.Method)
		}
	}
	if got := sample(t, "surge_http_request_duration_seconds", other); got-before != 5 {
		t.Fatalf("\"other\" grew by %v, want 5", got-before)
	}
}

func get(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestGatewayObserverCountsReservations: each reservation the gateway
// reports counts under its outcome, a retry's too, and so do sold-out
// answers from the hint; undos count as releases of mode undo. The
// results are pkg/stock's contract, not an engine's.
func TestGatewayObserverCountsReservations(t *testing.T) {
	cases := []struct {
		step gateway.Step
		r    gateway.Result
		want string
	}{
		{gateway.StepReserve, gateway.Result{Reservation: order.Reservation{Avail: 3}}, ReservationReserved},
		{gateway.StepReserveRetry, gateway.Result{Reservation: order.Reservation{Repeat: true}}, ReservationRepeat},
		{gateway.StepReserve, gateway.Result{Err: fmt.Errorf("reserve: %w", order.ErrSoldOut)}, ReservationSoldOut},
		{gateway.StepReserveRetry, gateway.Result{Err: fmt.Errorf("reserve: %w", order.ErrNotLoaded)}, ReservationNotLoaded},
		{gateway.StepReserve, gateway.Result{Err: fmt.Errorf("reserve: i/o timeout")}, ReservationError},
	}
	ctx := context.Background()
	var obs GatewayObserver
	for _, c := range cases {
		labels := map[string]string{"outcome": c.want}
		before := sample(t, "surge_reservations_total", labels)
		obs.End(obs.Begin(ctx, c.step, order.Order{}), c.step, order.Order{}, c.r)
		if got := sample(t, "surge_reservations_total", labels); got != before+1 {
			t.Errorf("outcome %s: counter went %v -> %v, want +1", c.want, before, got)
		}
	}
	cached := map[string]string{"outcome": ReservationSoldOutCached}
	before := sample(t, "surge_reservations_total", cached)
	obs.Answered(ctx, order.Order{}, gateway.AnswerSoldOutSighted)
	if got := sample(t, "surge_reservations_total", cached); got != before+1 {
		t.Errorf("sold out from the hint: counter went %v -> %v, want +1", before, got)
	}
	unknown := sample(t, "surge_orders_outcome_unknown_total", map[string]string{})
	obs.Answered(ctx, order.Order{}, gateway.AnswerOutcomeUnknown)
	if got := sample(t, "surge_orders_outcome_unknown_total", map[string]string{}); got != unknown+1 {
		t.Errorf("outcome unknown: counter went %v -> %v, want +1", unknown, got)
	}
	for err, result := range map[error]string{nil: "ok", order.ErrNotYours: "kept", errors.New("i/o timeout"): "error"} {
		labels := map[string]string{"mode": "undo", "result": result}
		before := sample(t, "surge_reservation_releases_total", labels)
		obs.End(ctx, gateway.StepUndo, order.Order{}, gateway.Result{Err: err})
		if got := sample(t, "surge_reservation_releases_total", labels); got != before+1 {
			t.Errorf("undo %s: counter went %v -> %v, want +1", result, before, got)
		}
	}
}

func TestWorkerObserverCountsRetriesAndDeadLetters(t *testing.T) {
	retried := sample(t, "surge_retries_total", map[string]string{})
	dead := sample(t, "surge_dead_letters_total", map[string]string{})
	invoiced := sample(t, "surge_worker_processing_seconds", map[string]string{"outcome": "invoiced"})
	var o WorkerObserver
	o.Observe("retried", time.Millisecond)
	o.Observe("dead", time.Millisecond)
	o.Observe("dead", time.Millisecond)
	o.Observe("invoiced", 5*time.Millisecond)
	if got := sample(t, "surge_retries_total", map[string]string{}); got != retried+1 {
		t.Errorf("retries %v -> %v, want +1", retried, got)
	}
	if got := sample(t, "surge_dead_letters_total", map[string]string{}); got != dead+2 {
		t.Errorf("dead letters %v -> %v, want +2", dead, got)
	}
	if got := sample(t, "surge_worker_processing_seconds", map[string]string{"outcome": "invoiced"}); got != invoiced+1 {
		t.Errorf("invoiced timings %v -> %v, want +1", invoiced, got)
	}
}

// TestWorkerObserverCountsLockAttempts: each lock step counts as
// acquired, contended (Contended says another owner holds the lock) or
// error, and its time as a lock wait; the other steps count no lock.
func TestWorkerObserverCountsLockAttempts(t *testing.T) {
	errBusy := errors.New("lock not obtained")
	obs := WorkerObserver{Contended: func(err error) bool { return errors.Is(err, errBusy) }}
	ctx := context.Background()
	cases := []struct {
		step worker.Step
		err  error
		want string
	}{
		{worker.StepLock, nil, LockAcquired},
		{worker.StepLock, fmt.Errorf("lock: %w", errBusy), LockContended},
		{worker.StepLock, errors.New("i/o timeout"), LockError},
	}
	for _, c := range cases {
		labels := map[string]string{"result": c.want}
		before, waits := sample(t, "surge_lock_acquisitions_total", labels), sample(t, "surge_lock_wait_seconds", nil)
		obs.End(obs.Begin(ctx, c.step, order.Order{}), c.step, order.Order{}, worker.Result{Err: c.err, Took: time.Millisecond})
		if got := sample(t, "surge_lock_acquisitions_total", labels); got != before+1 {
			t.Errorf("lock %s: counter went %v -> %v, want +1", c.want, before, got)
		}
		if got := sample(t, "surge_lock_wait_seconds", nil); got != waits+1 {
			t.Errorf("lock %s: waits went %v -> %v, want +1", c.want, waits, got)
		}
	}
	errors0 := sample(t, "surge_lock_acquisitions_total", map[string]string{"result": LockError})
	WorkerObserver{}.End(ctx, worker.StepLock, order.Order{}, worker.Result{Err: errBusy})
	obs.End(ctx, worker.StepLedger, order.Order{}, worker.Result{Err: errors.New("deadlock")})
	if got := sample(t, "surge_lock_acquisitions_total", map[string]string{"result": LockError}); got != errors0+1 {
		t.Errorf("errors went %v -> %v, want +1 (the lock without Contended, not the ledger's)", errors0, got)
	}
}

func TestReconcileRunSetsLastSuccess(t *testing.T) {
	errs := sample(t, "surge_reconcile_runs_total", map[string]string{"result": "error"})
	ReconcileRun(time.Second, fmt.Errorf("mysql down"))
	if got := sample(t, "surge_reconcile_runs_total", map[string]string{"result": "error"}); got != errs+1 {
		t.Errorf("error runs %v -> %v, want +1", errs, got)
	}
	ReconcileRun(time.Second, nil)
	last := sample(t, "surge_reconcile_last_success_timestamp_seconds", map[string]string{})
	if now := float64(time.Now().Unix()); last < now-60 || last > now+1 {
		t.Errorf("last success %v, want about %v", last, now)
	}
}

func TestHandlerServesEveryFamily(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, name := range []string{
		"surge_reservations_total", "surge_publish_total", "surge_worker_orders_total",
		"surge_retries_total", "surge_dead_letters_total", "surge_reconcile_drift_total",
		"surge_reconcile_repairs_total", "surge_lock_acquisitions_total", "surge_cache_requests_total",
		"surge_cache_rebuilds_total", "surge_rate_limit_decisions_total", "go_goroutines",
		"surge_build_info", "surge_order_accepted_to_invoiced_seconds", "surge_publish_batch_orders",
		"surge_worker_mysql_batches_total", "surge_worker_mysql_batch_orders_total",
	} {
		if !strings.Contains(body, "\n"+name) && !strings.HasPrefix(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestBuildInfo: the build is published, once, with value 1 and the Go
// version of the binary.
func TestBuildInfo(t *testing.T) {
	fams, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "surge_build_info" {
			continue
		}
		ms := f.GetMetric()
		if len(ms) != 1 || value(ms[0]) != 1 {
			t.Fatalf("surge_build_info: %v, want one series of value 1", ms)
		}
		for _, lp := range ms[0].GetLabel() {
			if lp.GetName() == "goversion" && lp.GetValue() == runtime.Version() {
				return
			}
		}
		t.Fatalf("surge_build_info labels %v lack goversion=%s", ms[0].GetLabel(), runtime.Version())
	}
	t.Fatal("surge_build_info is not published")
}

// The worker's batch counters read its batcher: transactions and the
// orders in them, so a dashboard can divide one by the other.
func TestWorkerBatchCountersReadTheBatcher(t *testing.T) {
	WorkerBatcher(func() (int64, int64) { return 3, 45 })
	t.Cleanup(func() { batchStats.Store(nil) })
	got := map[string]float64{}
	fams, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "surge_worker_mysql_batches_total", "surge_worker_mysql_batch_orders_total":
			got[f.GetName()] = value(f.GetMetric()[0])
		}
	}
	if got["surge_worker_mysql_batches_total"] != 3 || got["surge_worker_mysql_batch_orders_total"] != 45 {
		t.Fatalf("batch counters %v, want 3 transactions and 45 orders", got)
	}
}
