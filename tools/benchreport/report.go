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
	"strings"

	"surge/tools/ceiling"
	"surge/tools/loadgen"
)

// The part files a run leaves in its directory.
const (
	FileNaive     = "naive.json"
	FileFlash     = "flash.json"
	FileFlashHalf = "flash-half.json"
	FileSustained = "sustained.json"
	// FileSustainedHalf is an open loop at half the sustained accepted
	// rate, every order accepted: the accepting path's latency with room.
	FileSustainedHalf = "sustained-half.json"
	FileRawRedis      = "raw-redis.json"
	FileRawRedisP     = "raw-redis-pipelined.json"
	FileRawAMQP       = "raw-amqp.json"
	FileRawMySQL      = "raw-mysql.json"
	FileRawHTTP       = "raw-http.json"
	FileVersions      = "versions.txt"
	FileLoad          = "loadavg-before.txt"
)

// Parts are the raw measurements of one run; a missing part is nil.
type Parts struct {
	Naive, Flash, FlashHalf, Sustained, SustainedHalf       *loadgen.RunReport
	RawRedis, RawRedisPipelined, RawAMQP, RawMySQL, RawHTTP *ceiling.Result
	// Versions are lines naming the engines' versions.
	Versions []string
	// LoadBefore is /proc/loadavg as it was before the run.
	LoadBefore string
}

// ReadParts reads the parts found in dir.
func ReadParts(dir string) (Parts, error) {
	var p Parts
	for _, f := range []struct {
		name string
		dst  any
	}{
		{FileNaive, &p.Naive}, {FileFlash, &p.Flash}, {FileFlashHalf, &p.FlashHalf}, {FileSustained, &p.Sustained},
		{FileSustainedHalf, &p.SustainedHalf},
		{FileRawRedis, &p.RawRedis}, {FileRawRedisP, &p.RawRedisPipelined}, {FileRawAMQP, &p.RawAMQP}, {FileRawMySQL, &p.RawMySQL}, {FileRawHTTP, &p.RawHTTP},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Parts{}, fmt.Errorf("read %s: %w", f.name, err)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return Parts{}, fmt.Errorf("decode %s: %w", f.name, err)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, FileVersions)); err == nil {
		p.Versions = nonEmptyLines(string(raw))
	}
	if raw, err := os.ReadFile(filepath.Join(dir, FileLoad)); err == nil {
		p.LoadBefore = loadAvg(string(raw))
	}
	return p, nil
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
	CheckOK      bool    `json:"check_ok"`
	// Problems are the correctness check's findings.
	Problems []string `json:"problems,omitempty"`
}

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
	Machine           Machine    `json:"machine"`
	FlashSale         *Scenario  `json:"flash_sale,omitempty"`
	FlashSaleHalfRate *Scenario  `json:"flash_sale_half_rate,omitempty"`
	NaiveSQL          *Scenario  `json:"naive_sql,omitempty"`
	Sustained         *Sustained `json:"sustained,omitempty"`
	// SustainedHalfRate is an open loop at half the sustained accepted rate.
	SustainedHalfRate *Scenario `json:"sustained_half_rate,omitempty"`
	Raw               Raw       `json:"raw"`
	Memory            *Memory   `json:"memory,omitempty"`
	Ratios            Ratios    `json:"ratios"`
	Targets           []Target  `json:"targets"`
}

// Ratios compare surge with its baselines, measured in the same run.
type Ratios struct {
	FlashVsNaiveRPS          float64 `json:"flash_vs_naive_rps"`
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
	r.FlashSaleHalfRate = scenario(p.FlashHalf)
	r.Sustained = sustained(p.Sustained)
	r.SustainedHalfRate = scenario(p.SustainedHalf)
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
		RedisCPUUS:  redisCPU(rep.Processes),
		RabbitCPUUS: rep.Processes["rabbitmq"].CPUPerRequestUS, MariaCPUUS: rep.Processes["mariadb"].CPUPerRequestUS,
	}
	if l.SendLag != nil {
		s.SendLagP50Ms, s.SendLagP99Ms = l.SendLag.P50Ms, l.SendLag.P99Ms
	}
	s.Other = l.Counts.Done - s.Accepted - s.SoldOut
	if c := rep.Check; c != nil {
		s.Invoiced = c.Books.Invoices
		s.CheckOK = c.OK
		s.Problems = c.Problems
	}
	return s
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
