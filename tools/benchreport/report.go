// Package benchreport turns the parts a benchmark run wrote (one JSON file
// per scenario and per raw ceiling) into results.json, the table of rates
// and ratios with the targets met or missed, and the plots.
package benchreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"surge/tools/ceiling"
	"surge/tools/loadgen"
)

// The part files a run leaves in its directory.
const (
	FileNaive = "naive.json"
	FileFlash = "flash.json"
	// FileSoldOut is surge's closed loop on a SKU already sold out: its
	// most sold-out answers per second. FileFloor is the floor's (package
	// floor) under the same load, right after it.
	FileSoldOut = "sold-out.json"
	FileFloor   = "floor.json"
	// FileSoldOutKeys is surge answering sold out while the cluster's keys
	// and memory are read before and after: what a sold-out answer leaves
	// in Redis.
	FileSoldOutKeys = "sold-out-keys.json"
	FileSustained   = "sustained.json"
	FileRawRedis    = "raw-redis.json"
	FileRawRedisP   = "raw-redis-pipelined.json"
	FileRawAMQP     = "raw-amqp.json"
	FileRawMySQL    = "raw-mysql.json"
	FileRawHTTP     = "raw-http.json"
	FileVersions    = "versions.txt"
	FileLoad        = "loadavg-before.txt"
)

// The paths an open loop runs on, each at a share of a maximum measured
// in the same run (OpenLoopFile).
const (
	// PathSoldOut is surge answering sold out, at a share of its own
	// sold-out maximum (FileSoldOut).
	PathSoldOut = "sold-out"
	// PathFloor is the floor at the same rates as PathSoldOut.
	PathFloor = "floor"
	// PathAccepting is surge accepting every order, at a share of the
	// sustained load's accepted rate (FileSustained).
	PathAccepting = "accepting"
)

// halfPercent is the open-loop point the latency targets read.
const halfPercent = 50

// OpenLoopFile names the part of path's open loop at percent of its
// maximum: "sold-out-open-50.json".
func OpenLoopFile(path string, percent int) string {
	return path + "-open-" + strconv.Itoa(percent) + ".json"
}

// parseOpenLoopFile reads OpenLoopFile's name back; ok is false for any
// other file.
func parseOpenLoopFile(name string) (key OpenKey, ok bool) {
	stem, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return OpenKey{}, false
	}
	path, pct, ok := strings.Cut(stem, "-open-")
	if !ok {
		return OpenKey{}, false
	}
	n, err := strconv.Atoi(pct)
	if err != nil || n <= 0 || n > 100 || (path != PathSoldOut && path != PathFloor && path != PathAccepting) {
		return OpenKey{}, false
	}
	return OpenKey{Path: path, Percent: n}, true
}

// OpenKey names one open loop: its path and its share of the path's
// maximum, in percent.
type OpenKey struct {
	Path    string
	Percent int
}

// Parts are the raw measurements of one run; a missing part is nil.
type Parts struct {
	Naive, Flash, Sustained *loadgen.RunReport
	// SoldOut and Floor are the closed loops answering sold out: surge on
	// a SKU already sold out, and the floor.
	SoldOut, Floor *loadgen.RunReport
	// SoldOutKeys is surge answering sold out with Redis read around it.
	SoldOutKeys *loadgen.RunReport
	// Open are the open loops.
	Open                                                    map[OpenKey]*loadgen.RunReport
	RawRedis, RawRedisPipelined, RawAMQP, RawMySQL, RawHTTP *ceiling.Result
	// Versions are lines naming the engines' versions.
	Versions []string
	// LoadBefore is /proc/loadavg as it was before the run.
	LoadBefore string
}

// ReadParts reads the parts found in dir.
func ReadParts(dir string) (Parts, error) {
	p := Parts{Open: map[OpenKey]*loadgen.RunReport{}}
	for _, f := range []struct {
		name string
		dst  any
	}{
		{FileNaive, &p.Naive}, {FileFlash, &p.Flash}, {FileSustained, &p.Sustained},
		{FileSoldOut, &p.SoldOut}, {FileFloor, &p.Floor}, {FileSoldOutKeys, &p.SoldOutKeys},
		{FileRawRedis, &p.RawRedis}, {FileRawRedisP, &p.RawRedisPipelined}, {FileRawAMQP, &p.RawAMQP}, {FileRawMySQL, &p.RawMySQL}, {FileRawHTTP, &p.RawHTTP},
	} {
		if err := readJSON(filepath.Join(dir, f.name), f.dst); err != nil {
			return Parts{}, err
		}
	}
	open, err := filepath.Glob(filepath.Join(dir, "*-open-*.json"))
	if err != nil {
		return Parts{}, fmt.Errorf("list the open loops: %w", err)
	}
	for _, path := range open {
		key, ok := parseOpenLoopFile(filepath.Base(path))
		if !ok {
			continue
		}
		var rep *loadgen.RunReport
		if err := readJSON(path, &rep); err != nil {
			return Parts{}, err
		}
		p.Open[key] = rep
	}
	if raw, err := os.ReadFile(filepath.Join(dir, FileVersions)); err == nil {
		p.Versions = nonEmptyLines(string(raw))
	}
	if raw, err := os.ReadFile(filepath.Join(dir, FileLoad)); err == nil {
		p.LoadBefore = loadAvg(string(raw))
	}
	return p, nil
}

// readJSON decodes the file at path into dst; a missing file leaves dst
// as it is.
func readJSON(path string, dst any) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Scenario is one load's headline numbers.
type Scenario struct {
	Concurrency int     `json:"concurrency"`
	Mode        string  `json:"mode"`
	TargetRate  float64 `json:"target_rate,omitempty"`
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	Accepted    int64   `json:"accepted"`
	SoldOut     int64   `json:"sold_out"`
	Other       int64   `json:"other"`
	Invoiced    int64   `json:"invoiced"`
	// DrainS is how long after the load the last invoice was written.
	DrainS *float64 `json:"drain_s,omitempty"`
	// GatewayCPUUS and WorkerCPUUS are each service's CPU time per request
	// during the load; MachineBusy the share of the machine's CPU in use.
	GatewayCPUUS float64 `json:"gateway_cpu_us_per_request,omitempty"`
	WorkerCPUUS  float64 `json:"worker_cpu_us_per_request,omitempty"`
	// LoadgenCPUUS is the generator's own CPU per request.
	LoadgenCPUUS float64 `json:"loadgen_cpu_us_per_request,omitempty"`
	// FloorCPUUS is the floor server's CPU per request.
	FloorCPUUS float64 `json:"floor_cpu_us_per_request,omitempty"`
	// RedisCPUUS (all cluster nodes together), RabbitCPUUS and MariaCPUUS
	// are the engines' CPU per request, when their pids were given.
	RedisCPUUS  float64 `json:"redis_cpu_us_per_request,omitempty"`
	RabbitCPUUS float64 `json:"rabbitmq_cpu_us_per_request,omitempty"`
	MariaCPUUS  float64 `json:"mariadb_cpu_us_per_request,omitempty"`
	MachineBusy float64 `json:"machine_busy"`
	// SendLagP50Ms and SendLagP99Ms (open loop) are how late the generator
	// sent requests after they were due; the latencies include it.
	SendLagP50Ms float64 `json:"send_lag_p50_ms,omitempty"`
	SendLagP99Ms float64 `json:"send_lag_p99_ms,omitempty"`
	// Check says what was checked: CheckBooks or CheckSoldOut; empty when
	// nothing was.
	Check   string `json:"check,omitempty"`
	CheckOK bool   `json:"check_ok"`
	// Problems are the correctness check's findings.
	Problems []string `json:"problems,omitempty"`
}

// What a scenario's check verified.
const (
	// CheckBooks: accepted == min(stock, demand), every accepted order
	// invoiced once, nothing oversold, Redis settled (loadgen.Verify).
	CheckBooks = "books"
	// CheckSoldOut: every answer was 409, on a SKU with nothing left.
	CheckSoldOut = "all sold out"
)

// Sustained adds rates over time to a scenario.
type Sustained struct {
	Scenario
	AcceptedPerS  float64 `json:"accepted_per_s"`
	InvoicedPerS  float64 `json:"invoiced_per_s"`
	MaxQueueDepth int64   `json:"max_queue_depth"`
	Series        []Rate  `json:"series"`
	// CPU is each process's CPU per accepted order, when their pids were
	// given.
	CPU *AcceptedCPU `json:"cpu_per_accepted,omitempty"`
}

// AcceptedCPU is the CPU time each process spent per accepted order during
// a load, in µs: the cost of the accepting path, whatever the rate.
type AcceptedCPU struct {
	Gateway  float64 `json:"gateway_cpu_us_per_accepted"`
	Worker   float64 `json:"worker_cpu_us_per_accepted"`
	Redis    float64 `json:"redis_cpu_us_per_accepted"`
	RabbitMQ float64 `json:"rabbitmq_cpu_us_per_accepted"`
	MariaDB  float64 `json:"mariadb_cpu_us_per_accepted"`
	// Pipeline is the sum of the five: what one accepted order costs the
	// whole pipeline, the generator left out.
	Pipeline float64 `json:"pipeline_cpu_us_per_accepted"`
}

// Rate is one interval of the sustained run.
type Rate struct {
	T            float64 `json:"t"`
	AcceptedPerS float64 `json:"accepted_per_s"`
	InvoicedPerS float64 `json:"invoiced_per_s"`
	QueueDepth   int64   `json:"queue_depth"`
}

// Raw are the engines' ceilings.
type Raw struct {
	RedisEvalshaPerS float64 `json:"redis_evalsha_per_s"`
	// RedisEvalshaPipelinedPerS is the same script pipelined: the engine's
	// own ceiling, beyond what one caller per round trip reaches.
	RedisEvalshaPipelinedPerS float64 `json:"redis_evalsha_pipelined_per_s"`
	AMQPConfirmedPublishPerS  float64 `json:"amqp_confirmed_publish_per_s"`
	MySQLBatchInsertPerS      float64 `json:"mysql_batch_insert_per_s"`
	// HTTPEmptyHandlerPerS is the generator against a handler that does
	// nothing: what the machine's HTTP stack allows before any engine.
	HTTPEmptyHandlerPerS float64  `json:"http_empty_handler_per_s"`
	Setups               []string `json:"setups"`
}

// Memory is what the flash sale cost in memory.
type Memory struct {
	GatewayPeakRSSMB float64 `json:"gateway_peak_rss_mb"`
	WorkerPeakRSSMB  float64 `json:"worker_peak_rss_mb"`
	RedisBefore      int64   `json:"redis_used_memory_before"`
	RedisAfter       int64   `json:"redis_used_memory_after"`
	RedisGrowth      int64   `json:"redis_growth"`
	// KeysGrowth is what the cluster gained in keys; RecordKeys the
	// records the sale's orders leave (all expiring).
	KeysGrowth    int64   `json:"redis_keys_growth"`
	RecordKeys    int64   `json:"record_keys"`
	BytesPerKey   float64 `json:"bytes_per_key"`
	RecordsNoTTL  int64   `json:"records_without_ttl"`
	RecordsTTLSec float64 `json:"records_ttl_s"`
}

// SoldOut compares surge's sold-out answers with the floor's, both driven
// by the same generator in the same run.
type SoldOut struct {
	// Surge and Floor are the closed loops: each path's maximum.
	Surge *Scenario `json:"surge,omitempty"`
	Floor *Scenario `json:"floor,omitempty"`
	// OpenLoop are surge and the floor, interleaved, at shares of surge's
	// maximum.
	OpenLoop []OpenPoint `json:"open_loop,omitempty"`
}

// OpenPoint is an open loop at a share of a path's maximum; its latencies
// count from when each request was due.
type OpenPoint struct {
	Percent int       `json:"percent_of_max"`
	Rate    float64   `json:"rate"`
	Surge   *Scenario `json:"surge,omitempty"`
	// Floor is the floor at the same rate (sold-out points only).
	Floor *Scenario `json:"floor,omitempty"`
	// P99VsFloor is surge's p99 over the floor's at this rate.
	P99VsFloor float64 `json:"p99_vs_floor,omitempty"`
}

// SoldOutRedis is what sold-out answers left in Redis: the cluster's
// DBSIZE and used_memory, each summed over the masters, read before the
// answers and a moment after them (loadgen run -redis).
type SoldOutRedis struct {
	// Load is the run that answered.
	Load *Scenario `json:"load"`
	// Answers are the 409 answers counted; Other the answers that were
	// not 409 (the reading then includes what they left).
	Answers    int64 `json:"sold_out_answers"`
	Other      int64 `json:"other_answers"`
	KeysAdded  int64 `json:"keys_added"`
	BytesAdded int64 `json:"bytes_added"`
	// Per100k and PerAnswer scale the additions to 100,000 answers and
	// to one.
	KeysPer100k    float64 `json:"keys_per_100k_answers"`
	BytesPer100k   float64 `json:"bytes_per_100k_answers"`
	KeysPerAnswer  float64 `json:"keys_per_answer"`
	BytesPerAnswer float64 `json:"bytes_per_answer"`
	// RecordsNoTTL are the sampled records that would never expire.
	RecordsNoTTL int64 `json:"records_without_ttl"`
	// OwnRecordsPerAnswer are the answers' own records found in Redis
	// after the reading, per answer, from a sample of the answers: an
	// idempotency record and an order state each at most. It cross-checks
	// KeysPerAnswer, which counts every key of a shared cluster: fewer
	// keys than the answers' own records means keys elsewhere went away
	// during the reading.
	OwnRecordsPerAnswer float64 `json:"own_records_per_answer"`
}

// Disturbed tells whether the cluster gained fewer keys than the answers'
// own records: other keys were deleted or expired during the reading.
func (k SoldOutRedis) Disturbed() bool { return k.KeysPerAnswer < 0.95*k.OwnRecordsPerAnswer }

// Target is one goal of the benchmark and whether this run met it.
type Target struct {
	Name string  `json:"name"`
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Unit string  `json:"unit"`
	Met  bool    `json:"met"`
}

// Results is results.json.
type Results struct {
	Machine   Machine   `json:"machine"`
	FlashSale *Scenario `json:"flash_sale,omitempty"`
	NaiveSQL  *Scenario `json:"naive_sql,omitempty"`
	SoldOut   *SoldOut  `json:"sold_out,omitempty"`
	// SoldOutRedis is what the sold-out answers left in Redis.
	SoldOutRedis *SoldOutRedis `json:"sold_out_redis,omitempty"`
	// Sustained is the accepting path's maximum: every order accepted.
	Sustained *Sustained `json:"sustained,omitempty"`
	// AcceptingOpenLoop are open loops at shares of the sustained accepted
	// rate, every order accepted.
	AcceptingOpenLoop []OpenPoint `json:"accepting_open_loop,omitempty"`
	Raw               Raw         `json:"raw"`
	Memory            *Memory     `json:"memory,omitempty"`
	Ratios            Ratios      `json:"ratios"`
	Targets           []Target    `json:"targets"`
}

// Ratios compare surge with its baselines, measured in the same run.
type Ratios struct {
	FlashVsNaiveRPS float64 `json:"flash_vs_naive_rps"`
	// SoldOutVsFloorRPS is surge's sold-out answers per second over the
	// floor's, closed loop; SoldOutP99VsFloor surge's p99 over the
	// floor's at half surge's maximum.
	SoldOutVsFloorRPS        float64 `json:"sold_out_vs_floor_rps"`
	SoldOutP99VsFloor        float64 `json:"sold_out_p99_vs_floor_at_half"`
	AcceptedVsPublishCeiling float64 `json:"sustained_accepted_vs_publish_ceiling"`
	InvoicedVsInsertCeiling  float64 `json:"sustained_invoiced_vs_insert_ceiling"`
}

// Build computes the results from the parts.
func Build(p Parts, m Machine) Results {
	r := Results{Machine: m}
	r.Machine.Versions = p.Versions
	r.Machine.LoadBefore = p.LoadBefore
	r.NaiveSQL = scenario(p.Naive)
	r.FlashSale = scenario(p.Flash)
	r.SoldOut = soldOut(p)
	r.SoldOutRedis = soldOutRedis(p.SoldOutKeys)
	r.Sustained = sustained(p.Sustained)
	r.AcceptingOpenLoop = openLoop(p.Open, PathAccepting, "")
	for _, c := range []struct {
		res *ceiling.Result
		dst *float64
	}{
		{p.RawRedis, &r.Raw.RedisEvalshaPerS}, {p.RawRedisPipelined, &r.Raw.RedisEvalshaPipelinedPerS}, {p.RawAMQP, &r.Raw.AMQPConfirmedPublishPerS},
		{p.RawMySQL, &r.Raw.MySQLBatchInsertPerS}, {p.RawHTTP, &r.Raw.HTTPEmptyHandlerPerS},
	} {
		if c.res != nil {
			*c.dst = c.res.PerSec
			r.Raw.Setups = append(r.Raw.Setups, c.res.Name+": "+c.res.Setup)
		}
	}
	r.Memory = memory(p.Flash)
	if r.FlashSale != nil && r.NaiveSQL != nil {
		r.Ratios.FlashVsNaiveRPS = ratio(r.FlashSale.RPS, r.NaiveSQL.RPS)
	}
	if so := r.SoldOut; so != nil {
		if so.Surge != nil && so.Floor != nil {
			r.Ratios.SoldOutVsFloorRPS = ratio(so.Surge.RPS, so.Floor.RPS)
		}
		if pt := at(so.OpenLoop, halfPercent); pt != nil {
			r.Ratios.SoldOutP99VsFloor = pt.P99VsFloor
		}
	}
	if r.Sustained != nil {
		r.Ratios.AcceptedVsPublishCeiling = ratio(r.Sustained.AcceptedPerS, r.Raw.AMQPConfirmedPublishPerS)
		r.Ratios.InvoicedVsInsertCeiling = ratio(r.Sustained.InvoicedPerS, r.Raw.MySQLBatchInsertPerS)
	}
	r.Targets = targets(r)
	return r
}

func scenario(rep *loadgen.RunReport) *Scenario {
	if rep == nil {
		return nil
	}
	l := rep.Load
	s := &Scenario{
		Concurrency: l.Concurrency, Mode: l.Mode, TargetRate: l.TargetRate,
		Requests: l.Counts.Done, Seconds: l.Seconds, RPS: math.Round(l.RPS),
		P50Ms: l.Latency.P50Ms, P90Ms: l.Latency.P90Ms, P99Ms: l.Latency.P99Ms, P999Ms: l.Latency.P999Ms, MaxMs: l.Latency.MaxMs,
		Accepted: l.Counts.Of(http.StatusAccepted), SoldOut: l.Counts.Of(http.StatusConflict),
		DrainS:       rep.DrainSeconds,
		GatewayCPUUS: rep.Processes["gateway"].CPUPerRequestUS, WorkerCPUUS: rep.Processes["worker"].CPUPerRequestUS,
		LoadgenCPUUS: rep.Processes["loadgen"].CPUPerRequestUS, MachineBusy: rep.MachineBusy,
		FloorCPUUS:  rep.Processes["floor"].CPUPerRequestUS,
		RedisCPUUS:  redisCPU(rep.Processes),
		RabbitCPUUS: rep.Processes["rabbitmq"].CPUPerRequestUS, MariaCPUUS: rep.Processes["mariadb"].CPUPerRequestUS,
	}
	if l.SendLag != nil {
		s.SendLagP50Ms, s.SendLagP99Ms = l.SendLag.P50Ms, l.SendLag.P99Ms
	}
	s.Other = l.Counts.Done - s.Accepted - s.SoldOut
	if c := rep.Check; c != nil {
		s.Invoiced = c.Books.Invoices
		s.Check = CheckBooks
		s.CheckOK = c.OK
		s.Problems = c.Problems
	}
	return s
}

// soldOutScenario is scenario for a load on a SKU with nothing left: its
// check is that every answer was 409.
func soldOutScenario(rep *loadgen.RunReport) *Scenario {
	s := scenario(rep)
	if s == nil {
		return nil
	}
	s.Check = CheckSoldOut
	s.CheckOK = s.Requests > 0 && s.SoldOut == s.Requests
	if !s.CheckOK {
		s.Problems = append(s.Problems, fmt.Sprintf("%d of %d answers were not 409 (status counts %v)",
			s.Requests-s.SoldOut, s.Requests, rep.Load.Counts.Status))
	}
	return s
}

func soldOut(p Parts) *SoldOut {
	so := &SoldOut{Surge: soldOutScenario(p.SoldOut), Floor: soldOutScenario(p.Floor), OpenLoop: openLoop(p.Open, PathSoldOut, PathFloor)}
	if so.Surge == nil && so.Floor == nil && len(so.OpenLoop) == 0 {
		return nil
	}
	return so
}

// openLoop gathers path's open loops by percent, each with beside's at the
// same percent when beside is set; sold-out paths are checked as such.
func openLoop(open map[OpenKey]*loadgen.RunReport, path, beside string) []OpenPoint {
	build := scenario
	if path == PathSoldOut {
		build = soldOutScenario
	}
	var out []OpenPoint
	for key, rep := range open {
		if key.Path != path {
			continue
		}
		pt := OpenPoint{Percent: key.Percent, Surge: build(rep)}
		pt.Rate = pt.Surge.TargetRate
		if beside != "" {
			pt.Floor = soldOutScenario(open[OpenKey{Path: beside, Percent: key.Percent}])
		}
		if pt.Floor != nil {
			pt.P99VsFloor = ratio(pt.Surge.P99Ms, pt.Floor.P99Ms)
		}
		out = append(out, pt)
	}
	slices.SortFunc(out, func(a, b OpenPoint) int { return a.Percent - b.Percent })
	return out
}

// at returns the point at percent, nil when there is none.
func at(points []OpenPoint, percent int) *OpenPoint {
	for i := range points {
		if points[i].Percent == percent {
			return &points[i]
		}
	}
	return nil
}

func soldOutRedis(rep *loadgen.RunReport) *SoldOutRedis {
	if rep == nil || rep.Redis == nil {
		return nil
	}
	rr := rep.Redis
	answers := rep.Load.Counts.Of(http.StatusConflict)
	r := &SoldOutRedis{Load: soldOutScenario(rep), Answers: answers, Other: rep.Load.Counts.Done - answers,
		KeysAdded: rr.KeysGrowth, BytesAdded: rr.MemoryGrowth, RecordsNoTTL: rr.Records.NoTTL,
		OwnRecordsPerAnswer: math.Round((rr.Idem.Present()+rr.States.Present())*1e4) / 1e4}
	if answers > 0 {
		per := func(v int64) float64 { return float64(v) / float64(answers) }
		r.KeysPer100k, r.BytesPer100k = math.Round(per(rr.KeysGrowth)*100_000), math.Round(per(rr.MemoryGrowth)*100_000)
		r.KeysPerAnswer, r.BytesPerAnswer = math.Round(per(rr.KeysGrowth)*1e4)/1e4, math.Round(per(rr.MemoryGrowth)*10)/10
	}
	return r
}

func sustained(rep *loadgen.RunReport) *Sustained {
	sc := scenario(rep)
	if sc == nil {
		return nil
	}
	s := &Sustained{Scenario: *sc}
	s.AcceptedPerS = math.Round(float64(s.Accepted) / s.Seconds)
	s.CPU = acceptedCPU(rep.Processes, s.Accepted)
	// Invoices per second over the whole time they were being written:
	// from the first request until the last invoice.
	span := s.Seconds
	if s.DrainS != nil && *s.DrainS > 0 {
		span += *s.DrainS
	}
	s.InvoicedPerS = math.Round(float64(s.Invoiced) / span)
	for i, cur := range rep.Series {
		depth := cur.Probes["queue_depth"]
		s.MaxQueueDepth = max(s.MaxQueueDepth, depth)
		if i == 0 {
			continue
		}
		prev := rep.Series[i-1]
		dt := cur.T - prev.T
		if dt <= 0 {
			continue
		}
		s.Series = append(s.Series, Rate{
			T:            cur.T,
			AcceptedPerS: math.Round(float64(cur.Accepted-prev.Accepted) / dt),
			InvoicedPerS: math.Round(float64(cur.Probes["invoiced"]-prev.Probes["invoiced"]) / dt),
			QueueDepth:   depth,
		})
	}
	return s
}

func memory(flash *loadgen.RunReport) *Memory {
	if flash == nil || (flash.Processes == nil && flash.Redis == nil) {
		return nil
	}
	m := &Memory{
		GatewayPeakRSSMB: flash.Processes["gateway"].PeakRSSMB,
		WorkerPeakRSSMB:  flash.Processes["worker"].PeakRSSMB,
	}
	if rr := flash.Redis; rr != nil {
		m.RedisBefore, m.RedisAfter, m.RedisGrowth = rr.Before.UsedMemory, rr.After.UsedMemory, rr.MemoryGrowth
		m.KeysGrowth, m.RecordKeys, m.BytesPerKey = rr.KeysGrowth, rr.ExpectedKeys, rr.BytesPerKey
		m.RecordsNoTTL, m.RecordsTTLSec = rr.Records.NoTTL, rr.Records.MaxTTLSeconds
	}
	return m
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*100) / 100
}

// acceptedCPU divides each process's CPU time during the load by the orders
// accepted; nil when no process was measured or nothing was accepted.
func acceptedCPU(procs map[string]loadgen.ProcStats, accepted int64) *AcceptedCPU {
	if len(procs) == 0 || accepted <= 0 {
		return nil
	}
	per := func(name string) float64 {
		var s float64
		for n, p := range procs {
			if n == name || (name == "redis" && strings.HasPrefix(n, "redis")) {
				s += p.CPUSeconds
			}
		}
		return math.Round(s/float64(accepted)*1e7) / 10
	}
	c := &AcceptedCPU{Gateway: per("gateway"), Worker: per("worker"), Redis: per("redis"), RabbitMQ: per("rabbitmq"), MariaDB: per("mariadb")}
	c.Pipeline = math.Round((c.Gateway+c.Worker+c.Redis+c.RabbitMQ+c.MariaDB)*10) / 10
	return c
}

// redisCPU sums the CPU per request of the processes named redis*: the
// cluster's nodes, masters and replicas.
func redisCPU(procs map[string]loadgen.ProcStats) float64 {
	var us float64
	for name, p := range procs {
		if strings.HasPrefix(name, "redis") {
			us += p.CPUPerRequestUS
		}
	}
	return math.Round(us*10) / 10
}
