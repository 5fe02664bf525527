package loadgen

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestLatencySummaryPercentiles(t *testing.T) {
	l := NewLatency()
	// 1..10000 µs, one each, spread over the shards: p50 is 5 ms, p99 9.9 ms.
	for i := 1; i <= 10000; i++ {
		l.Record(i, time.Duration(i)*time.Microsecond)
	}
	s := l.Summary()
	if s.Count != 10000 {
		t.Fatalf("count = %d, want 10000", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 5}, {"p90", s.P90Ms, 9}, {"p99", s.P99Ms, 9.9}, {"p99.9", s.P999Ms, 9.99},
		{"max", s.MaxMs, 10}, {"mean", s.MeanMs, 5.0005},
	} {
		if math.Abs(c.got-c.want) > c.want*0.001+0.001 {
			t.Errorf("%s = %v ms, want %v ms within 0.1%%", c.name, c.got, c.want)
		}
	}
	if first, last := s.Curve[0], s.Curve[len(s.Curve)-1]; first.Percentile != 0 || last.Percentile != 100 {
		t.Errorf("curve runs from %v to %v, want 0 to 100", first, last)
	}
	for i := 1; i < len(s.Curve); i++ {
		if s.Curve[i].Ms < s.Curve[i-1].Ms {
			t.Errorf("curve decreases at %v after %v", s.Curve[i], s.Curve[i-1])
		}
	}
}

func TestLatencyClampsOutOfRange(t *testing.T) {
	l := NewLatency()
	l.Record(0, 0)
	l.Record(0, time.Hour)
	s := l.Summary()
	if s.Count != 2 || s.MaxMs < 59_000 || s.MaxMs > 61_000 {
		t.Fatalf("summary %+v: want 2 values, the largest clamped to one minute", s)
	}
}

func TestLatencyCurveStopsAtTheLastRequest(t *testing.T) {
	l := NewLatency()
	for i := range 100 {
		l.Record(i, time.Millisecond)
	}
	for _, p := range l.Summary().Curve {
		if p.Percentile > 99 && p.Percentile < 100 {
			t.Errorf("curve has %v%% with only 100 requests", p.Percentile)
		}
	}
}

func TestLatencyConcurrentRecords(t *testing.T) {
	l := NewLatency()
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for range 1000 {
				l.Record(w, time.Millisecond)
			}
		})
	}
	wg.Wait()
	if s := l.Summary(); s.Count != 32_000 {
		t.Fatalf("count = %d, want 32000", s.Count)
	}
}

func TestEmptySummary(t *testing.T) {
	if s := NewLatency().Summary(); s.Count != 0 || s.Curve != nil {
		t.Fatalf("empty histogram summary = %+v", s)
	}
}
