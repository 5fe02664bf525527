package loadgen

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency bounds: values are recorded in microseconds between 1 µs and one
// minute with three significant digits (0.1% relative error).
const (
	minLatencyUS = 1
	maxLatencyUS = int64(time.Minute / time.Microsecond)
	latencyShard = 8
)

// Latency is a concurrent latency histogram. Recording goes to one of a few
// mutex-guarded HDR histograms (spread by the caller's worker number), so
// hundreds of workers neither contend on one lock nor each hold a
// 100 KB histogram.
type Latency struct {
	shards [latencyShard]struct {
		mu sync.Mutex
		h  *hdrhistogram.Histogram
		_  [40]byte // keep shards on separate cache lines
	}
}

// NewLatency returns an empty histogram.
func NewLatency() *Latency {
	l := &Latency{}
	for i := range l.shards {
		l.shards[i].h = newHDR()
	}
	return l
}

func newHDR() *hdrhistogram.Histogram { return hdrhistogram.New(minLatencyUS, maxLatencyUS, 3) }

// Record adds one latency, clamped into the histogram's range; worker picks
// the shard.
func (l *Latency) Record(worker int, d time.Duration) {
	us := d.Microseconds()
	us = max(us, minLatencyUS)
	us = min(us, maxLatencyUS)
	s := &l.shards[uint(worker)%latencyShard]
	s.mu.Lock()
	_ = s.h.RecordValue(us) // in range by construction
	s.mu.Unlock()
}

// merged returns one histogram holding every shard's values.
func (l *Latency) merged() *hdrhistogram.Histogram {
	out := newHDR()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		out.Merge(s.h)
		s.mu.Unlock()
	}
	return out
}

// Point is one point of the latency distribution: Percentile (0-100) of
// the requests completed within Ms milliseconds.
type Point struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// LatencySummary is the distribution reported for a run, in milliseconds.
type LatencySummary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Curve samples the distribution for plots, denser towards the tail.
	Curve []Point `json:"curve,omitempty"`
}

// curvePercentiles are the points plotted: a percentile axis in "nines".
var curvePercentiles = []float64{0, 10, 25, 50, 75, 80, 90, 95, 97, 98, 99, 99.5, 99.7, 99.8,
	99.9, 99.95, 99.97, 99.99, 99.995, 99.999, 100}

// Summary computes the distribution of everything recorded so far.
func (l *Latency) Summary() LatencySummary {
	h := l.merged()
	n := h.TotalCount()
	if n == 0 {
		return LatencySummary{}
	}
	s := LatencySummary{
		Count:  n,
		MeanMs: round3(h.Mean() / 1000),
		P50Ms:  ms(h.ValueAtPercentile(50)),
		P90Ms:  ms(h.ValueAtPercentile(90)),
		P99Ms:  ms(h.ValueAtPercentile(99)),
		P999Ms: ms(h.ValueAtPercentile(99.9)),
		MaxMs:  ms(h.Max()),
	}
	vals := h.ValueAtPercentilesSlice(curvePercentiles)
	for i, p := range curvePercentiles {
		// Past the last request the curve says nothing new.
		if p > 0 && p < 100 && float64(n)*(100-p)/100 < 1 {
			continue
		}
		s.Curve = append(s.Curve, Point{Percentile: p, Ms: ms(vals[i])})
	}
	return s
}

// ms converts microseconds to milliseconds with three decimals.
func ms(us int64) float64 { return round3(float64(us) / 1000) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
