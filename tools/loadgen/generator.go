package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Target sends one request. i numbers the requests of a run from 0, each
// number used once, so a target can derive unique ids from it. status is
// the HTTP status, or 0 with err set when no response came back.
type Target interface {
	Do(ctx context.Context, i int64) (status int, err error)
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, i int64) (int, error)

// Do calls f.
func (f TargetFunc) Do(ctx context.Context, i int64) (int, error) { return f(ctx, i) }

// Options shape a run. The zero value is not runnable: set Requests or
// Duration.
type Options struct {
	// Concurrency is the number of workers: the requests in flight in a
	// closed loop, the most in flight in an open loop. Default 64.
	Concurrency int
	// Requests stops a closed loop after this many requests (0: run for
	// Duration).
	Requests int64
	// Duration stops the run after this long (0: after Requests).
	Duration time.Duration
	// Rate > 0 makes an open loop: requests start at this many per second
	// whatever the latency, and each latency counts from the moment its
	// request was due, so a stalled server is not hidden by a stalled
	// generator (no coordinated omission). An open loop needs Duration.
	Rate float64
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// SlowAfter is the latency from which a request counts as slow (Slow,
	// and the Sampler's series: where in a run the slow ones were).
	// Default 5ms.
	SlowAfter time.Duration
}

func (o *Options) setDefaults() {
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.SlowAfter == 0 {
		o.SlowAfter = 5 * time.Millisecond
	}
}

// validate rejects options no run can follow.
func (o Options) validate() error {
	switch {
	case o.Concurrency < 0 || o.Requests < 0 || o.Duration < 0 || o.Rate < 0 || o.Timeout < 0 || o.SlowAfter < 0:
		return fmt.Errorf("load options: negative value in %+v", o)
	case o.Requests == 0 && o.Duration == 0:
		return fmt.Errorf("load options: set a number of requests or a duration")
	case o.Rate > 0 && o.Duration == 0:
		return fmt.Errorf("load options: an open loop (rate) needs a duration")
	}
	return nil
}

// Result is what a run measured.
type Result struct {
	// Mode is "closed" or "open".
	Mode        string  `json:"mode"`
	Concurrency int     `json:"concurrency"`
	TargetRate  float64 `json:"target_rate,omitempty"`
	// Seconds is the wall time from the first request to the last answer.
	Seconds float64 `json:"seconds"`
	// RPS is completed requests per second.
	RPS          float64        `json:"rps"`
	Counts       Counts         `json:"counts"`
	ErrorSamples []string       `json:"error_samples,omitempty"`
	Latency      LatencySummary `json:"latency"`
	// SendLag, in an open loop, is how late each request was sent after it
	// was due: every worker busy (Concurrency too low for the server's
	// latency), or the generator itself not scheduled on a busy machine.
	// Latency includes it.
	SendLag *LatencySummary `json:"send_lag,omitempty"`
}

// Generator runs one load. Snapshot may be called while Run runs (progress
// bars, samplers).
type Generator struct {
	opts   Options
	target Target
	counts counts
	lat    *Latency
	lag    *Latency     // open loop: send time minus due time
	next   atomic.Int64 // next request number
	slow   atomic.Int64 // requests that took SlowAfter or longer

	mu    sync.Mutex
	start time.Time
}

// New checks opts and returns a generator for target.
func New(opts Options, target Target) (*Generator, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Generator{opts: opts, target: target, lat: NewLatency(), lag: NewLatency()}, nil
}

// Options returns the run's options with defaults applied.
func (g *Generator) Options() Options { return g.opts }

// Slow returns how many requests so far took Options.SlowAfter or longer.
func (g *Generator) Slow() int64 { return g.slow.Load() }

// Snapshot returns the outcomes so far and the time since the run started.
func (g *Generator) Snapshot() (Counts, time.Duration) {
	g.mu.Lock()
	start := g.start
	g.mu.Unlock()
	var elapsed time.Duration
	if !start.IsZero() {
		elapsed = time.Since(start)
	}
	return g.counts.snapshot(), elapsed
}

// Run sends the load and returns once every request it started has been
// answered. Ending ctx stops intake and cancels the requests in flight.
func (g *Generator) Run(ctx context.Context) Result {
	start := time.Now()
	g.mu.Lock()
	g.start = start
	g.mu.Unlock()
	mode := "closed"
	if g.opts.Rate > 0 {
		mode = "open"
		g.runOpen(ctx, start)
	} else {
		g.runClosed(ctx, start)
	}
	elapsed := time.Since(start)
	c := g.counts.snapshot()
	var lag *LatencySummary
	if mode == "open" {
		l := g.lag.Summary()
		lag = &l
	}
	return Result{
		SendLag:      lag,
		Mode:         mode,
		Concurrency:  g.opts.Concurrency,
		TargetRate:   g.opts.Rate,
		Seconds:      round3(elapsed.Seconds()),
		RPS:          round3(float64(c.Done) / elapsed.Seconds()),
		Counts:       c,
		ErrorSamples: g.counts.errorSamples(),
		Latency:      g.lat.Summary(),
	}
}

// runClosed keeps Concurrency requests in flight until Requests were sent
// or Duration passed.
func (g *Generator) runClosed(ctx context.Context, start time.Time) {
	deadline := g.deadline(start)
	var wg sync.WaitGroup
	for w := range g.opts.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				i := g.next.Add(1) - 1
				if g.opts.Requests > 0 && i >= g.opts.Requests {
					return
				}
				g.one(ctx, w, i, time.Now())
			}
		})
	}
	wg.Wait()
}

// runOpen starts requests at Rate per second until Duration passed. A
// request waits for a free worker when all are busy; its latency counts
// from when it was due.
func (g *Generator) runOpen(ctx context.Context, start time.Time) {
	due := make(chan time.Time, g.opts.Concurrency)
	var wg sync.WaitGroup
	for w := range g.opts.Concurrency {
		wg.Go(func() {
			for at := range due {
				g.lag.Record(w, time.Since(at))
				g.one(ctx, w, g.next.Add(1)-1, at)
			}
		})
	}
	interval := time.Duration(float64(time.Second) / g.opts.Rate)
	total := int64(g.opts.Duration / interval)
	if g.opts.Requests > 0 {
		total = min(total, g.opts.Requests)
	}
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case due <- at:
		case <-ctx.Done():
		}
	}
	close(due)
	wg.Wait()
}

func (g *Generator) deadline(start time.Time) time.Time {
	if g.opts.Duration == 0 {
		return time.Time{}
	}
	return start.Add(g.opts.Duration)
}

// one sends request i and records it; at is when it was due.
func (g *Generator) one(ctx context.Context, worker int, i int64, at time.Time) {
	rctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	status, err := g.target.Do(rctx, i)
	cancel()
	took := time.Since(at)
	g.lat.Record(worker, took)
	if took >= g.opts.SlowAfter {
		g.slow.Add(1)
	}
	g.counts.add(status, err)
}
