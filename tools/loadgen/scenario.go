package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"surge/pkg/keys"
)

// Scenario is one measured load: load the stock, send the orders, wait
// until the pipeline has written every invoice, check the books, and note
// what it cost in memory.
type Scenario struct {
	// Label names the scenario in reports ("flash_sale").
	Label   string
	Options Options
	Orders  *Orders
	// Stock is loaded through StockAPI before the run; < 0 loads nothing.
	Stock    int
	StockAPI StockAPI
	// MaxPerCustomer > 0 loads the stock with that purchase limit per
	// customer.
	MaxPerCustomer int
	// Ledger reads MySQL: the invoices sampled, waited for and checked.
	Ledger *Ledger
	// Check waits until MySQL holds every accepted order (and the queue is
	// empty), then verifies the books. It needs Ledger.
	Check bool
	// StockView adds the admin API's Redis view to the check.
	StockView bool
	// QueueDepth reads the work queue's ready messages; nil means there is
	// no queue (the naive baseline).
	QueueDepth func(ctx context.Context) (int64, error)
	// DrainTimeout bounds the wait for the last invoice. Default 60s (also
	// for a negative value).
	DrainTimeout time.Duration
	// SampleEvery > 0 records a time series (progress, invoices, queue).
	SampleEvery time.Duration
	// Processes maps a name to a pid whose peak RSS, and CPU time during
	// the load, are read.
	Processes map[string]int
	// Redis, when set, measures used_memory before and after the run and
	// audits a sample of the records the orders left. Each reading first
	// has Redis reclaim the keys that have expired (ReclaimExpired).
	Redis *redis.ClusterClient
	// RedisSettle is waited before used_memory is read after the run, so
	// that short-lived keys (rate-limit budgets) have expired. Default 0.
	RedisSettle time.Duration
	// Progress receives a live progress bar; nil draws none.
	Progress io.Writer
	// Profiles, when it has URLs, records CPU profiles from the start of
	// the load.
	Profiles CPUProfiles
}

// RunReport is what a scenario measured; loadgen -json writes it.
type RunReport struct {
	Label string `json:"label"`
	SKU   string `json:"sku"`
	Stock int    `json:"stock"`
	RunID string `json:"run_id"`
	Load  Result `json:"load"`
	// DrainSeconds is the time from the end of the load until MySQL held
	// every accepted order and the queue was empty (-1: it never did).
	DrainSeconds *float64             `json:"drain_s,omitempty"`
	Check        *Check               `json:"check,omitempty"`
	Series       []Sample             `json:"series,omitempty"`
	Processes    map[string]ProcStats `json:"processes,omitempty"`
	// MachineBusy is the share of the machine's CPU time that was busy
	// during the load (all processes, this generator included).
	MachineBusy float64      `json:"machine_busy"`
	Redis       *RedisReport `json:"redis,omitempty"`
}

// RedisReport is the cluster's memory around a run.
type RedisReport struct {
	Before RedisMemory `json:"before"`
	After  RedisMemory `json:"after"`
	// Records audits a sample of the orders' idempotency records and
	// order states: all must expire.
	Records RecordAudit `json:"records"`
	// Idem and States are the same sample's idempotency records and
	// order states apart: what share of the orders left each.
	Idem   RecordAudit `json:"idem_records"`
	States RecordAudit `json:"order_states"`
	// ExpectedKeys are the records the orders leave: an idempotency record
	// per order, an order state per order that ran the reserve script (the
	// gateway answers most of a sold-out sale without it: the share is
	// read from the audited sample), and the SKU's order-lock fencing
	// counter.
	// KeysGrowth and MemoryGrowth are what the cluster gained; BytesPerKey
	// their ratio.
	ExpectedKeys int64   `json:"expected_keys"`
	KeysGrowth   int64   `json:"keys_growth"`
	MemoryGrowth int64   `json:"memory_growth"`
	BytesPerKey  float64 `json:"bytes_per_key"`
}

func (s *Scenario) setDefaults() {
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = time.Minute
	}
}

// Run plays the scenario.
func (s Scenario) Run(ctx context.Context) (RunReport, error) {
	s.setDefaults()
	rep := RunReport{Label: s.Label, SKU: s.Orders.SKU, Stock: s.Stock, RunID: s.Orders.RunID}
	var before RedisMemory
	if s.Redis != nil {
		var err error
		if before, err = readReclaimed(ctx, s.Redis); err != nil {
			return rep, err
		}
	}
	if s.Stock >= 0 {
		if err := s.StockAPI.Load(ctx, s.Orders.SKU, s.Stock, 1999, s.MaxPerCustomer); err != nil {
			return rep, err
		}
	}
	gen, err := New(s.Options, s.Orders)
	if err != nil {
		return rep, err
	}
	stopSampling := s.sample(ctx, gen, &rep)
	stopProgress := func() {}
	if s.Progress != nil {
		stopProgress = ShowProgress(ctx, gen, s.Progress, s.Label)
	}
	cpu := s.startCPU()
	profiled := s.Profiles.Start(ctx)
	rep.Load = gen.Run(ctx)
	stopProgress()
	rep.Processes, rep.MachineBusy = cpu.stop(rep.Load.Counts.Done)
	if s.Check && s.Ledger != nil {
		rep.DrainSeconds, rep.Check, err = s.drainAndCheck(ctx, rep.Load.Counts)
	}
	stopSampling()
	if perr := profiled(); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return rep, err
	}
	if s.Redis != nil {
		if rep.Redis, err = s.auditRedis(ctx, before, rep.Load.Counts); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// sample records the series until the returned stop is called.
func (s Scenario) sample(ctx context.Context, gen *Generator, rep *RunReport) (stop func()) {
	if s.SampleEvery <= 0 {
		return func() {}
	}
	var probes []Probe
	if s.Ledger != nil {
		probes = append(probes, Probe{Name: "invoiced", Read: s.sold})
	}
	if s.QueueDepth != nil {
		probes = append(probes, Probe{Name: "queue_depth", Read: s.QueueDepth})
	}
	sampler := NewSampler(gen, s.SampleEvery, probes...)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); sampler.Run(sctx) }()
	return func() {
		cancel()
		<-done
		rep.Series = sampler.Samples()
	}
}

// sold reads the orders MySQL has invoiced for the SKU, from the product
// row (one primary-key read, cheap enough to poll).
func (s Scenario) sold(ctx context.Context) (int64, error) {
	b, err := s.Ledger.Books(ctx, s.Orders.SKU)
	if err != nil {
		return 0, err
	}
	return b.Sold / int64(s.Orders.Qty), nil
}

func (s Scenario) drainAndCheck(ctx context.Context, c Counts) (*float64, *Check, error) {
	accepted := c.Of(http.StatusAccepted)
	waited, ok := WaitFor(ctx, 50*time.Millisecond, s.DrainTimeout, func(ctx context.Context) (bool, error) {
		sold, err := s.sold(ctx)
		if err != nil || sold < accepted {
			return false, err
		}
		if s.QueueDepth == nil {
			return true, nil
		}
		depth, err := s.QueueDepth(ctx)
		return depth == 0, err
	})
	drain := round3(waited.Seconds())
	if !ok {
		drain = -1
	}
	in := CheckInput{Stock: int64(s.Stock), Qty: int64(s.Orders.Qty), Counts: c}
	var err error
	if in.Books, err = s.Ledger.Books(ctx, s.Orders.SKU); err != nil {
		return &drain, nil, err
	}
	if s.StockView {
		v, err := s.StockAPI.View(ctx, s.Orders.SKU)
		if err != nil {
			return &drain, nil, err
		}
		in.View = &v
	}
	check := Verify(in)
	return &drain, &check, nil
}

// cpuMeter holds CPU readings taken when the load started.
type cpuMeter struct {
	procs   map[string]int
	before  map[string]float64
	machine MachineCPU
}

func (s Scenario) startCPU() cpuMeter {
	m := cpuMeter{procs: s.Processes, before: map[string]float64{}}
	for name, pid := range s.Processes {
		if v, err := ReadProcCPU(pid); err == nil {
			m.before[name] = v
		}
	}
	m.machine, _ = ReadMachineCPU()
	return m
}

// stop reads each process's memory and CPU time since start, and the
// machine's busy share. Processes that cannot be read are left out.
func (m cpuMeter) stop(requests int64) (map[string]ProcStats, float64) {
	var busy float64
	if now, err := ReadMachineCPU(); err == nil && now.Total > m.machine.Total {
		busy = round3((now.Busy - m.machine.Busy) / (now.Total - m.machine.Total))
	}
	if len(m.procs) == 0 {
		return nil, busy
	}
	out := make(map[string]ProcStats, len(m.procs))
	for name, pid := range m.procs {
		st, err := ReadProcMemory(pid)
		if err != nil {
			continue
		}
		if v, err := ReadProcCPU(pid); err == nil {
			st.CPUSeconds = round3(v - m.before[name])
			if requests > 0 {
				st.CPUPerRequestUS = round3(st.CPUSeconds / float64(requests) * 1e6)
			}
		}
		out[name] = st
	}
	return out, busy
}

func readReclaimed(ctx context.Context, rdb *redis.ClusterClient) (RedisMemory, error) {
	if err := ReclaimExpired(ctx, rdb); err != nil {
		return RedisMemory{}, err
	}
	return ReadRedisMemory(ctx, rdb)
}

// auditSample bounds the records audited after a run.
const auditSample = 500

// existingID is the id request i got: the one of its two possible
// windows whose idempotency record exists (the first when neither does).
func (s Scenario) existingID(ctx context.Context, i int64) (string, error) {
	ids := s.Orders.OrderIDs(i)
	n, err := s.Redis.Exists(ctx, keys.Idem(ids[1])).Result()
	if err != nil {
		return "", fmt.Errorf("look up the record of request %d: %w", i, err)
	}
	if n == 1 {
		return ids[1], nil
	}
	return ids[0], nil
}

func (s Scenario) auditRedis(ctx context.Context, before RedisMemory, c Counts) (*RedisReport, error) {
	sent := c.Done
	select {
	case <-time.After(s.RedisSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := readReclaimed(ctx, s.Redis)
	if err != nil {
		return nil, err
	}
	step := max(sent/auditSample, 1)
	var idemKeys, stateKeys []string
	for i := int64(0); i < sent; i += step {
		id, err := s.existingID(ctx, i)
		if err != nil {
			return nil, err
		}
		idemKeys = append(idemKeys, keys.Idem(id))
		stateKeys = append(stateKeys, keys.OrderState(s.Orders.SKU, id))
	}
	idem, err := AuditRecords(ctx, s.Redis, idemKeys)
	if err != nil {
		return nil, err
	}
	state, err := AuditRecords(ctx, s.Redis, stateKeys)
	if err != nil {
		return nil, err
	}
	rep := &RedisReport{
		Before: before, After: after, Idem: idem, States: state,
		Records: RecordAudit{
			Checked:       idem.Checked + state.Checked,
			Missing:       idem.Missing + state.Missing,
			NoTTL:         idem.NoTTL + state.NoTTL,
			MaxTTLSeconds: max(idem.MaxTTLSeconds, state.MaxTTLSeconds),
			AvgBytes:      round3((idem.AvgBytes + state.AvgBytes) / 2),
		},
		ExpectedKeys: sent + statesWritten(state, sent) + min(c.Of(http.StatusAccepted), 1),
		KeysGrowth:   after.Keys - before.Keys,
		MemoryGrowth: after.UsedMemory - before.UsedMemory,
	}
	if rep.KeysGrowth > 0 {
		rep.BytesPerKey = round3(float64(rep.MemoryGrowth) / float64(rep.KeysGrowth))
	}
	return rep, nil
}

// statesWritten estimates how many of sent orders left an order state on
// the SKU's slot, from the share of the sampled ones that did.
func statesWritten(a RecordAudit, sent int64) int64 {
	if a.Checked == 0 {
		return sent
	}
	return int64(math.Round(float64(sent) * float64(a.Checked-a.Missing) / float64(a.Checked)))
}

// String summarises a report in one line per fact, for terminals.
func (r RunReport) String() string {
	l := r.Load
	s := fmt.Sprintf("%s: %d requests in %.2fs = %.0f req/s (%s loop, %d workers)\n"+
		"  latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n  status: %v\n",
		r.Label, l.Counts.Done, l.Seconds, l.RPS, l.Mode, l.Concurrency,
		l.Latency.P50Ms, l.Latency.P90Ms, l.Latency.P99Ms, l.Latency.P999Ms, l.Latency.MaxMs, l.Counts.Status)
	for _, e := range l.ErrorSamples {
		s += "  error: " + e + "\n"
	}
	if r.DrainSeconds != nil {
		s += fmt.Sprintf("  drained %.2fs after the load\n", *r.DrainSeconds)
	}
	if c := r.Check; c != nil {
		verdict := "OK"
		if !c.OK {
			verdict = "FAILED"
		}
		s += fmt.Sprintf("  check %s: accepted %d (want %d), invoices %d, sold %d of %d\n",
			verdict, c.Accepted, c.Expected, c.Books.Invoices, c.Books.Sold, c.Books.Stock)
		for _, p := range c.Problems {
			s += "    - " + p + "\n"
		}
	}
	for name, m := range r.Processes {
		s += fmt.Sprintf("  %s: peak RSS %.1f MB, CPU %.2f s during the load (%.0f us per request)\n",
			name, m.PeakRSSMB, m.CPUSeconds, m.CPUPerRequestUS)
	}
	if r.MachineBusy > 0 {
		s += fmt.Sprintf("  machine CPU busy during the load: %.0f%%\n", r.MachineBusy*100)
	}
	if rr := r.Redis; rr != nil {
		s += fmt.Sprintf("  redis: used_memory %+d B, keys %+d (the orders' records: %d, %.0f B each), sampled records without TTL: %d of %d\n",
			rr.MemoryGrowth, rr.KeysGrowth, rr.ExpectedKeys, rr.BytesPerKey, rr.Records.NoTTL, rr.Records.Checked)
	}
	return s
}
