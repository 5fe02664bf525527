package loadgen

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// recorder is a target that remembers which request numbers it saw.
type recorder struct {
	mu   sync.Mutex
	seen map[int64]int
	do   func(i int64) (int, error)
}

func newRecorder(do func(i int64) (int, error)) *recorder {
	return &recorder{seen: map[int64]int{}, do: do}
}

func (r *recorder) Do(_ context.Context, i int64) (int, error) {
	r.mu.Lock()
	r.seen[i]++
	r.mu.Unlock()
	return r.do(i)
}

func (r *recorder) assertEachOnce(t *testing.T, n int64) {
	t.Helper()
	if int64(len(r.seen)) != n {
		t.Fatalf("saw %d distinct requests, want %d", len(r.seen), n)
	}
	for i := range n {
		if r.seen[i] != 1 {
			t.Fatalf("request %d sent %d times", i, r.seen[i])
		}
	}
}

func TestClosedLoopSendsEachRequestOnce(t *testing.T) {
	rec := newRecorder(func(i int64) (int, error) {
		switch {
		case i%10 == 0:
			return 0, errors.New("connection refused")
		case i < 100:
			return http.StatusAccepted, nil
		}
		return http.StatusConflict, nil
	})
	gen, err := New(Options{Concurrency: 16, Requests: 1000}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(context.Background())
	rec.assertEachOnce(t, 1000)
	want := map[string]int64{"202": 90, "409": 810, "error": 100}
	for k, v := range want {
		if res.Counts.Status[k] != v {
			t.Errorf("status %s: %d, want %d (all: %v)", k, res.Counts.Status[k], v, res.Counts.Status)
		}
	}
	if res.Counts.Done != 1000 || res.Latency.Count != 1000 || res.Mode != "closed" {
		t.Errorf("result %+v: want 1000 done and recorded, closed mode", res)
	}
	if len(res.ErrorSamples) != 1 || res.ErrorSamples[0] != "connection refused" {
		t.Errorf("error samples %q, want the one distinct error", res.ErrorSamples)
	}
}

func TestClosedLoopForADuration(t *testing.T) {
	rec := newRecorder(func(int64) (int, error) { time.Sleep(time.Millisecond); return http.StatusOK, nil })
	gen, err := New(Options{Concurrency: 4, Duration: 50 * time.Millisecond}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(context.Background())
	if res.Counts.Done == 0 || res.Counts.Of(http.StatusOK) != res.Counts.Done {
		t.Fatalf("counts %+v: want some requests, all 200", res.Counts)
	}
	rec.assertEachOnce(t, res.Counts.Done)
}

func TestOpenLoopSendsRateTimesDuration(t *testing.T) {
	rec := newRecorder(func(int64) (int, error) { return http.StatusAccepted, nil })
	gen, err := New(Options{Concurrency: 4, Rate: 1000, Duration: 100 * time.Millisecond}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(context.Background())
	rec.assertEachOnce(t, 100)
	if res.Mode != "open" || res.TargetRate != 1000 {
		t.Errorf("mode %q rate %v, want open at 1000", res.Mode, res.TargetRate)
	}
}

// A stalled server must show in the latencies of the requests that were due
// while it stalled, even though the generator could not send them.
func TestOpenLoopCountsLatencyFromWhenDue(t *testing.T) {
	const stall = 100 * time.Millisecond
	rec := newRecorder(func(i int64) (int, error) {
		if i == 0 {
			time.Sleep(stall)
		}
		return http.StatusAccepted, nil
	})
	gen, err := New(Options{Concurrency: 1, Rate: 100, Duration: 50 * time.Millisecond}, rec)
	if err != nil {
		t.Fatal(err)
	}
	res := gen.Run(context.Background())
	rec.assertEachOnce(t, 5)
	// Request 4 was due at 40 ms and could not start before 100 ms.
	if got := res.Latency.P50Ms; got < 50 {
		t.Fatalf("median latency %v ms; requests queued behind a %v stall must count their wait", got, stall)
	}
	if res.SendLag == nil || res.SendLag.P50Ms < 50 {
		t.Fatalf("send lag %+v; the requests behind the stall were sent late", res.SendLag)
	}
}

func TestCancelStopsTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder(func(i int64) (int, error) {
		if i == 10 {
			cancel()
		}
		return http.StatusAccepted, nil
	})
	gen, err := New(Options{Concurrency: 1, Requests: 1_000_000}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if res := gen.Run(ctx); res.Counts.Done != 11 {
		t.Fatalf("done %d after cancel at request 10, want 11", res.Counts.Done)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{},
		{Concurrency: -1, Requests: 1},
		{Rate: 10, Requests: 5},
		{Requests: 1, Timeout: -time.Second},
	} {
		if _, err := New(o, newRecorder(nil)); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	gen, err := New(Options{Requests: 1}, newRecorder(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o := gen.Options(); o.Concurrency != 64 || o.Timeout != 10*time.Second {
		t.Errorf("defaults %+v, want 64 workers and a 10s timeout", o)
	}
}
