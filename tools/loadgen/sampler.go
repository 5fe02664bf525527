package loadgen

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Probe reads one number from outside the generator at each sample: the
// invoices written so far, the work queue's depth.
type Probe struct {
	Name string
	Read func(ctx context.Context) (int64, error)
}

// Sample is the state of a run at T seconds from its start. Probes holds
// each probe's reading, -1 when the read failed.
type Sample struct {
	T        float64 `json:"t"`
	Done     int64   `json:"done"`
	Accepted int64   `json:"accepted"`
	// Slow counts the requests so far that took the generator's SlowAfter
	// or longer: its steps show when in a run the tail happened.
	Slow   int64            `json:"slow"`
	Probes map[string]int64 `json:"probes,omitempty"`
}

// Sampler records a time series of a generator's counts and of probes.
type Sampler struct {
	gen    *Generator
	every  time.Duration
	probes []Probe

	mu      sync.Mutex
	start   time.Time
	samples []Sample
}

// NewSampler samples gen and probes every interval.
func NewSampler(gen *Generator, every time.Duration, probes ...Probe) *Sampler {
	return &Sampler{gen: gen, every: every, probes: probes}
}

// Run samples until ctx ends, starting with a sample at once.
func (s *Sampler) Run(ctx context.Context) {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sample takes one sample now (also used for a last one after Run).
func (s *Sampler) sample(ctx context.Context) {
	c, _ := s.gen.Snapshot()
	sm := Sample{Done: c.Done, Accepted: c.Of(http.StatusAccepted), Slow: s.gen.Slow()}
	if len(s.probes) > 0 {
		sm.Probes = make(map[string]int64, len(s.probes))
		for _, p := range s.probes {
			// A sample under way when the sampler is stopped completes.
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			v, err := p.Read(pctx)
			cancel()
			if err != nil {
				v = -1
			}
			sm.Probes[p.Name] = v
		}
	}
	s.mu.Lock()
	sm.T = round3(time.Since(s.start).Seconds())
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

// Samples returns the series so far.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

// WaitFor polls done every poll until it reports true or timeout passes,
// and returns how long it waited. A read error counts as "not yet".
func WaitFor(ctx context.Context, poll, timeout time.Duration, done func(ctx context.Context) (bool, error)) (time.Duration, bool) {
	start := time.Now()
	for {
		ok, err := done(ctx)
		if err == nil && ok {
			return time.Since(start), true
		}
		if time.Since(start) >= timeout || ctx.Err() != nil {
			return time.Since(start), false
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}
