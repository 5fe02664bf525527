package benchreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surge/tools/ceiling"
	"surge/tools/loadgen"
)

func run(rps, p99 float64, accepted, soldOut int64, ok bool) *loadgen.RunReport {
	secs := float64(accepted+soldOut) / rps
	return &loadgen.RunReport{
		Load: loadgen.Result{Mode: "closed", Concurrency: 256, Seconds: secs, RPS: rps,
			Counts:  loadgen.Counts{Done: accepted + soldOut, Status: map[string]int64{"202": accepted, "409": soldOut}},
			Latency: loadgen.LatencySummary{Count: accepted + soldOut, P50Ms: p99 / 4, P99Ms: p99, Curve: []loadgen.Point{{Percentile: 0, Ms: 0.1}, {Percentile: 50, Ms: p99 / 4}, {Percentile: 99, Ms: p99}, {Percentile: 100, Ms: p99 * 2}}}},
		Check: &loadgen.Check{OK: ok, Accepted: accepted, Books: loadgen.Books{Invoices: accepted}},
	}
}

func parts() Parts {
	drain := 0.5
	flash := run(25_000, 20, 100, 49_900, true)
	flash.Processes = map[string]loadgen.ProcStats{"gateway": {PeakRSSMB: 60, CPUPerRequestUS: 120}, "worker": {PeakRSSMB: 200, CPUPerRequestUS: 7}, "loadgen": {CPUPerRequestUS: 30}}
	flash.MachineBusy = 0.97
	flash.Redis = &loadgen.RedisReport{Before: loadgen.RedisMemory{UsedMemory: 10 << 20, Keys: 1000}, After: loadgen.RedisMemory{UsedMemory: 20 << 20, Keys: 101_100},
		ExpectedKeys: 100_100, KeysGrowth: 100_100, MemoryGrowth: 10 << 20}
	sus := run(10_000, 30, 200_000, 0, true)
	sus.DrainSeconds = &drain
	sus.Series = []loadgen.Sample{
		{T: 0, Accepted: 0, Probes: map[string]int64{"invoiced": 0, "queue_depth": 0}},
		{T: 0.5, Accepted: 5_000, Probes: map[string]int64{"invoiced": 4_000, "queue_depth": 900}},
		{T: 1, Accepted: 10_000, Probes: map[string]int64{"invoiced": 9_000, "queue_depth": 1_000}},
	}
	return Parts{
		Naive: run(2_000, 400, 100, 19_900, true), Flash: flash, FlashHalf: run(12_500, 4, 100, 99_900, false), Sustained: sus,
		SustainedHalf: run(5_000, 25, 50_000, 0, true),
		RawRedis:      &ceiling.Result{Name: "redis_evalsha", PerSec: 50_000}, RawAMQP: &ceiling.Result{Name: "amqp", PerSec: 20_000},
		RawMySQL: &ceiling.Result{Name: "mysql", PerSec: 40_000},
	}
}

func TestBuildComputesRatiosAndTargets(t *testing.T) {
	r := Build(parts(), Machine{CPUs: 2})
	if r.Ratios.FlashVsNaiveRPS != 12.5 || r.Ratios.AcceptedVsPublishCeiling != 0.5 || r.Ratios.InvoicedVsInsertCeiling != 0.24 {
		t.Fatalf("ratios %+v, want 12.5, 0.5 and 0.24", r.Ratios)
	}
	if r.FlashSale.Accepted != 100 || r.FlashSale.Invoiced != 100 || r.NaiveSQL.P99Ms != 400 {
		t.Fatalf("flash %+v naive %+v", r.FlashSale, r.NaiveSQL)
	}
	s := r.Sustained
	if s.AcceptedPerS != 10_000 || s.InvoicedPerS != 9_756 || s.MaxQueueDepth != 1_000 || len(s.Series) != 2 || s.Series[1].InvoicedPerS != 10_000 {
		t.Fatalf("sustained %+v", s)
	}
	met := map[string]bool{}
	for _, tg := range r.Targets {
		met[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"flash sale req/s vs naive SQL":                     true,
		"flash sale p99 at half the max rate":               true,
		"sustained accepted/s vs confirmed-publish ceiling": false,
		"queue drained after the sustained load":            true,
		"sustained invoices/s vs batched-insert ceiling":    false,
		"gateway peak RSS under the flash sale":             true,
		"worker peak RSS under the flash sale":              false,
		"Redis keys after the sale vs its expiring records": true,
		"correctness checks failed":                         false,
		"p99 at half the max accepting rate":                false,
	}
	for name, w := range want {
		if got, ok := met[name]; !ok || got != w {
			t.Errorf("target %q: met=%v (present %v), want %v", name, got, ok, w)
		}
	}
}

func TestPartsRoundTripThroughADirectory(t *testing.T) {
	dir := t.TempDir()
	p := parts()
	for name, v := range map[string]any{FileNaive: p.Naive, FileFlash: p.Flash, FileRawAMQP: p.RawAMQP} {
		raw, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, FileVersions), []byte("Redis 7\n\nRabbitMQ 3.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadParts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Naive == nil || got.Flash == nil || got.RawAMQP == nil || got.Sustained != nil || len(got.Versions) != 2 {
		t.Fatalf("parts read back: %+v", got)
	}
	if got.Flash.Load.RPS != 25_000 {
		t.Fatalf("flash rps %v after the round trip", got.Flash.Load.RPS)
	}
}

func TestWriteTableShowsEveryScenarioAndVerdict(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, Build(parts(), ReadMachine(time.Unix(0, 0)))); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"naive SQL", "surge flash sale (c=256)", "open loop", "surge sustained", "25,000",
		"confirmed persistent publishes      20,000/s", "MISSED", "FAILED", "worker 200.0 MB",
		"CPU during flash sale: machine 97% busy, loadgen 30 us/request, gateway 120 us/request, worker 7 us/request"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestPlotsAreWellFormedSVG(t *testing.T) {
	p := parts()
	var lat, sus bytes.Buffer
	if err := WriteLatencySVG(&lat, p); err != nil {
		t.Fatal(err)
	}
	if err := WriteSustainedSVG(&sus, Build(p, Machine{}).Sustained); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*bytes.Buffer{"latency": &lat, "sustained": &sus} {
		lines := strings.Count(b.String(), "<polyline")
		dec := xml.NewDecoder(b)
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s plot is not well-formed XML: %v", name, err)
			}
		}
		if lines < 2 {
			t.Errorf("%s plot draws %d lines, want at least 2", name, lines)
		}
	}
	if err := WriteLatencySVG(io.Discard, Parts{}); err == nil {
		t.Error("latency plot of nothing succeeded")
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.6: "1,234,568", -2500: "-2,500"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestSustainedCPUPerAcceptedSumsTheFiveProcesses(t *testing.T) {
	p := parts()
	// 200,000 accepted; seconds of CPU chosen so each process costs a round figure.
	p.Sustained.Processes = map[string]loadgen.ProcStats{
		"gateway": {CPUSeconds: 25}, "worker": {CPUSeconds: 24}, "redis7000": {CPUSeconds: 20}, "redis7003": {CPUSeconds: 21.2},
		"rabbitmq": {CPUSeconds: 26}, "mariadb": {CPUSeconds: 16}, "loadgen": {CPUSeconds: 99},
	}
	r := Build(p, Machine{})
	want := AcceptedCPU{Gateway: 125, Worker: 120, Redis: 206, RabbitMQ: 130, MariaDB: 80, Pipeline: 661}
	if got := r.Sustained.CPU; got == nil || *got != want {
		t.Fatalf("cpu per accepted %+v, want %+v", got, want)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if line := "pipeline_cpu_us_per_accepted 661 at 10,000 accepted/s"; !strings.Contains(b.String(), line) {
		t.Errorf("table lacks %q:\n%s", line, b.String())
	}
	if Build(parts(), Machine{}).Sustained.CPU != nil {
		t.Error("cpu per accepted reported with no process measured")
	}
}
