package benchreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// answers is a run that got every answer sold out, unchecked (a load on
// a SKU with nothing left).
func answers(rps, p99 float64, n int64) *loadgen.RunReport {
	r := run(rps, p99, 0, n, true)
	r.Check = nil
	return r
}

// open makes r an open loop at rate.
func open(r *loadgen.RunReport, rate float64) *loadgen.RunReport {
	r.Load.Mode, r.Load.TargetRate = "open", rate
	return r
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
	floor := answers(30_000, 12, 150_000)
	floor.Processes = map[string]loadgen.ProcStats{"floor": {CPUPerRequestUS: 21}, "loadgen": {CPUPerRequestUS: 18}}
	keys := answers(20_000, 15, 100_000)
	keys.Redis = &loadgen.RedisReport{KeysGrowth: 100_050, MemoryGrowth: 27_000_000, Records: loadgen.RecordAudit{Checked: 1000, Missing: 500},
		Idem: loadgen.RecordAudit{Checked: 500}, States: loadgen.RecordAudit{Checked: 500, Missing: 500}}
	p := Parts{
		Naive: run(2_000, 400, 100, 19_900, true), Flash: flash, Sustained: sus,
		SoldOut: answers(20_000, 15, 100_000), Floor: floor, SoldOutKeys: keys,
		Open:     map[OpenKey]*loadgen.RunReport{},
		RawRedis: &ceiling.Result{Name: "redis_evalsha", PerSec: 50_000}, RawAMQP: &ceiling.Result{Name: "amqp", PerSec: 20_000},
		RawMySQL: &ceiling.Result{Name: "mysql", PerSec: 40_000},
	}
	// Sold out at shares of 20,000/s, the floor beside at the same rates;
	// accepting at shares of 10,000/s (the sustained rate).
	for _, pt := range []struct {
		pct                          int
		surgeP99, floorP99, accepted float64
	}{{10, 1, 0.5, 5}, {30, 2, 0.8, 10}, {50, 4, 1, 25}, {70, 9, 2, 60}} {
		rate := 20_000 * float64(pt.pct) / 100
		p.Open[OpenKey{PathSoldOut, pt.pct}] = open(answers(rate, pt.surgeP99, int64(rate*5)), rate)
		p.Open[OpenKey{PathFloor, pt.pct}] = open(answers(rate, pt.floorP99, int64(rate*5)), rate)
		acc := 10_000 * float64(pt.pct) / 100
		p.Open[OpenKey{PathAccepting, pt.pct}] = open(run(acc, pt.accepted, int64(acc*5), 0, true), acc)
	}
	return p
}

func TestBuildComputesRatiosAndTargets(t *testing.T) {
	r := Build(parts(), Machine{CPUs: 2})
	want := Ratios{FlashVsNaiveRPS: 12.5, SoldOutVsFloorRPS: 0.67, SoldOutP99VsFloor: 4, AcceptedVsPublishCeiling: 0.5, InvoicedVsInsertCeiling: 0.24}
	if r.Ratios != want {
		t.Fatalf("ratios %+v, want %+v", r.Ratios, want)
	}
	if r.FlashSale.Accepted != 100 || r.FlashSale.Invoiced != 100 || r.NaiveSQL.P99Ms != 400 {
		t.Fatalf("flash %+v naive %+v", r.FlashSale, r.NaiveSQL)
	}
	s := r.Sustained
	if s.AcceptedPerS != 10_000 || s.InvoicedPerS != 9_756 || s.MaxQueueDepth != 1_000 || len(s.Series) != 2 || s.Series[1].InvoicedPerS != 10_000 {
		t.Fatalf("sustained %+v", s)
	}
	var pcts []int
	for _, pt := range r.SoldOut.OpenLoop {
		pcts = append(pcts, pt.Percent)
		if pt.Floor == nil || pt.Rate != 200*float64(pt.Percent) || pt.Surge.Check != CheckSoldOut || !pt.Surge.CheckOK {
			t.Errorf("sold-out point %+v", pt)
		}
	}
	if !slices.Equal(pcts, []int{10, 30, 50, 70}) || len(r.AcceptingOpenLoop) != 4 || r.AcceptingOpenLoop[2].Rate != 5_000 ||
		r.AcceptingOpenLoop[2].Floor != nil {
		t.Fatalf("open loops: sold out at %v, accepting %+v", pcts, r.AcceptingOpenLoop)
	}
	k := *r.SoldOutRedis
	k.Load = nil
	if wk := (SoldOutRedis{Answers: 100_000, KeysAdded: 100_050, BytesAdded: 27_000_000, KeysPer100k: 100_050, BytesPer100k: 27_000_000,
		KeysPerAnswer: 1.0005, BytesPerAnswer: 270, OwnRecordsPerAnswer: 1}); k != wk {
		t.Fatalf("sold-out Redis %+v, want %+v", k, wk)
	}
	met := map[string]bool{}
	var names []string
	for _, tg := range r.Targets {
		met[tg.Name] = tg.Met
		names = append(names, tg.Name)
	}
	wantMet := []struct {
		name string
		met  bool
	}{
		{"sold-out answers/s vs the floor, closed loop", false},
		{"flash sale req/s vs naive SQL", true},
		{"sold-out p99 at 50% of its max", true},
		{"sold-out p99 at 50% vs the floor's at that rate", false},
		{"Redis keys added per sold-out answer", false},
		{"accepting p99 at 50% of its max", false},
		{"queue drained after the sustained load", true},
		{"sustained accepted/s vs confirmed-publish ceiling", false},
		{"sustained invoices/s vs batched-insert ceiling", false},
		{"gateway peak RSS under the flash sale", true},
		{"worker peak RSS under the flash sale", false},
		{"Redis keys after the sale vs its expiring records", true},
		{"correctness checks failed", true},
	}
	var wantNames []string
	for _, w := range wantMet {
		wantNames = append(wantNames, w.name)
		if got := met[w.name]; got != w.met {
			t.Errorf("target %q: met=%v, want %v", w.name, got, w.met)
		}
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("targets in the order\n%q\nwant\n%q", names, wantNames)
	}
}

// Each case changes one part of the made-up run and reads one target.
func TestTargetsMetOrMissed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *Parts)
		target string
		got    float64
		met    bool
	}{
		{"sold out at 0.75 of the floor", func(p *Parts) { p.SoldOut.Load.RPS = 22_500 },
			"sold-out answers/s vs the floor, closed loop", 0.75, true},
		{"sold out at exactly 0.70", func(p *Parts) { p.SoldOut.Load.RPS = 21_000 },
			"sold-out answers/s vs the floor, closed loop", 0.7, true},
		{"sold out at 0.60", func(p *Parts) { p.SoldOut.Load.RPS = 18_000 },
			"sold-out answers/s vs the floor, closed loop", 0.6, false},
		{"fast, but some answers were 503", func(p *Parts) {
			p.SoldOut.Load.RPS = 29_000
			p.SoldOut.Load.Counts.Status["503"] = 10
			p.SoldOut.Load.Counts.Done += 10
		}, "sold-out answers/s vs the floor, closed loop", 0.97, false},
		{"the floor answered 404", func(p *Parts) { p.Floor.Load.Counts.Status = map[string]int64{"404": p.Floor.Load.Counts.Done} },
			"sold-out answers/s vs the floor, closed loop", 0.67, false},
		{"flash sale at 8x", func(p *Parts) { p.Flash.Load.RPS = 16_000 }, "flash sale req/s vs naive SQL", 8, true},
		{"flash sale at 7.5x", func(p *Parts) { p.Flash.Load.RPS = 15_000 }, "flash sale req/s vs naive SQL", 7.5, false},
		{"sold-out p99 6 ms at 50%", func(p *Parts) { p.Open[OpenKey{PathSoldOut, 50}].Load.Latency.P99Ms = 6 },
			"sold-out p99 at 50% of its max", 6, false},
		{"sold-out p99 at 3x the floor", func(p *Parts) { p.Open[OpenKey{PathSoldOut, 50}].Load.Latency.P99Ms = 3 },
			"sold-out p99 at 50% vs the floor's at that rate", 3, true},
		{"sold-out p99 at 2x a floor that failed", func(p *Parts) {
			p.Open[OpenKey{PathSoldOut, 50}].Load.Latency.P99Ms = 2
			p.Open[OpenKey{PathFloor, 50}].Load.Counts.Status["error"] = 1
			p.Open[OpenKey{PathFloor, 50}].Load.Counts.Done++
		}, "sold-out p99 at 50% vs the floor's at that rate", 2, false},
		{"500 keys per 100,000 answers", func(p *Parts) { p.SoldOutKeys.Redis.KeysGrowth = 500 },
			"Redis keys added per sold-out answer", 0.005, true},
		{"1,000 keys per 100,000 answers", func(p *Parts) { p.SoldOutKeys.Redis.KeysGrowth = 1_000 },
			"Redis keys added per sold-out answer", 0.01, true},
		{"few keys, but an order was accepted", func(p *Parts) {
			p.SoldOutKeys.Redis.KeysGrowth = 10
			p.SoldOutKeys.Load.Counts.Status["202"] = 1
			p.SoldOutKeys.Load.Counts.Done++
		}, "Redis keys added per sold-out answer", 0.0001, false},
		{"accepting p99 19 ms at 50%", func(p *Parts) { p.Open[OpenKey{PathAccepting, 50}].Load.Latency.P99Ms = 19 },
			"accepting p99 at 50% of its max", 19, true},
		{"a sold-out run answered 202 once", func(p *Parts) {
			p.Open[OpenKey{PathSoldOut, 10}].Load.Counts.Status["202"] = 1
			p.Open[OpenKey{PathSoldOut, 10}].Load.Counts.Done++
		}, "correctness checks failed", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parts()
			tc.change(&p)
			r := Build(p, Machine{})
			for _, tg := range r.Targets {
				if tg.Name != tc.target {
					continue
				}
				if tg.Got != tc.got || tg.Met != tc.met {
					t.Fatalf("%s: got %v met=%v, want %v met=%v", tg.Name, tg.Got, tg.Met, tc.got, tc.met)
				}
				return
			}
			t.Fatalf("no target %q in %+v", tc.target, r.Targets)
		})
	}
}

// Without the parts a target reads, the target is left out, not missed.
func TestTargetsNeedTheirParts(t *testing.T) {
	p := parts()
	p.Floor, p.SoldOutKeys = nil, nil
	delete(p.Open, OpenKey{PathSoldOut, 50})
	delete(p.Open, OpenKey{PathAccepting, 50})
	for _, tg := range Build(p, Machine{}).Targets {
		switch tg.Name {
		case "sold-out answers/s vs the floor, closed loop", "sold-out p99 at 50% of its max",
			"sold-out p99 at 50% vs the floor's at that rate", "Redis keys added per sold-out answer", "accepting p99 at 50% of its max":
			t.Errorf("target %q shown without its parts", tg.Name)
		}
	}
}

func TestOpenLoopFileNames(t *testing.T) {
	for name, want := range map[string]*OpenKey{
		OpenLoopFile(PathSoldOut, 50):   {PathSoldOut, 50},
		OpenLoopFile(PathFloor, 10):     {PathFloor, 10},
		OpenLoopFile(PathAccepting, 70): {PathAccepting, 70},
		"accepting-open-70.txt":         nil,
		"flash-open-50.json":            nil,
		"sold-out-open-x.json":          nil,
		"sold-out-open-0.json":          nil,
		"sold-out.json":                 nil,
	} {
		got, ok := parseOpenLoopFile(name)
		if (want == nil) == ok || (want != nil && got != *want) {
			t.Errorf("parseOpenLoopFile(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
}

func TestPartsRoundTripThroughADirectory(t *testing.T) {
	dir := t.TempDir()
	p := parts()
	for name, v := range map[string]any{FileNaive: p.Naive, FileFlash: p.Flash, FileRawAMQP: p.RawAMQP, FileFloor: p.Floor,
		OpenLoopFile(PathSoldOut, 30): p.Open[OpenKey{PathSoldOut, 30}], "notes-open-30.json": p.Naive} {
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
	if got.Naive == nil || got.Flash == nil || got.RawAMQP == nil || got.Floor == nil || got.Sustained != nil || len(got.Versions) != 2 {
		t.Fatalf("parts read back: %+v", got)
	}
	if rep := got.Open[OpenKey{PathSoldOut, 30}]; len(got.Open) != 1 || rep == nil || rep.Load.TargetRate != 6_000 {
		t.Fatalf("open loops read back: %+v", got.Open)
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
	for _, want := range []string{"naive SQL", "surge flash sale (c=256)", "surge sustained", "25,000",
		"surge sold out (c=256, 5s)", "floor sold out (c=256, 5s)",
		"surge sold out, 10% = 2,000/s", "floor sold out, 70% = 14,000/s", "surge accepting, 50% = 5,000/s",
		"surge sold out, Redis read (c=256)",
		"confirmed persistent publishes      20,000/s", "MISSED", "worker 200.0 MB",
		"CPU during flash sale: machine 97% busy, loadgen 30 us/request, gateway 120 us/request, worker 7 us/request",
		"CPU during sold out, floor: machine 0% busy, loadgen 18 us/request, floor 21 us/request",
		"CPU during sold out at 50%, surge", "CPU during sold out at 50%, floor", "CPU during accepting at 50%",
		"closed loop 20,000 vs 30,000 answers/s, 0.67 of the floor",
		"10% 1.00 vs 0.50 ms (2.0x), 30% 2.00 vs 0.80 ms (2.5x), 50% 4.00 vs 1.00 ms (4.0x), 70% 9.00 vs 2.00 ms (4.5x)",
		"accepting path (max 10,000 accepted/s, sustained): p99 at shares of its max: 10% 5.00 ms, 30% 10.00 ms, 50% 25.00 ms, 70% 60.00 ms",
		"Redis per 100,000 sold-out answers: +100,050 keys, +25.7 MB (per answer 1.0005 keys, 270 B); read over 100,000 answers, " +
			"0 sampled records without TTL; the answers' own records, sampled: 1.00 per answer\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`sold-out p99 at 50% vs the floor's at that rate +<= 3x +4 x +MISSED\n`).MatchString(out) {
		t.Errorf("table lacks the p99 ratio target missed:\n%s", out)
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("a check failed in a run where all pass:\n%s", out)
	}
	// A failed check shows in its row; an unchecked run shows "-".
	p := parts()
	p.Naive.Check.OK = false
	p.Open[OpenKey{PathFloor, 10}].Load.Counts.Status["503"] = 3
	p.Open[OpenKey{PathFloor, 10}].Load.Counts.Done += 3
	b.Reset()
	if err := WriteTable(&b, Build(p, Machine{})); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "FAILED"); n != 2 {
		t.Errorf("%d rows FAILED, want 2:\n%s", n, b.String())
	}
	p.Naive.Check = nil
	b.Reset()
	if err := WriteTable(&b, Build(p, Machine{})); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`naive SQL, 1 tx/order \(c=256\).* -\n`).MatchString(b.String()) {
		t.Errorf("an unchecked run's check column is not '-':\n%s", b.String())
	}
}

func TestPlotsAreWellFormedSVG(t *testing.T) {
	p := parts()
	var lat, sus, ol bytes.Buffer
	if err := WriteLatencySVG(&lat, p); err != nil {
		t.Fatal(err)
	}
	if err := WriteSustainedSVG(&sus, Build(p, Machine{}).Sustained); err != nil {
		t.Fatal(err)
	}
	if err := WriteOpenLoopSVG(&ol, Build(p, Machine{})); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*bytes.Buffer{"latency": &lat, "sustained": &sus, "open loop": &ol} {
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
	if err := WriteOpenLoopSVG(io.Discard, Results{}); err == nil {
		t.Error("open-loop plot of nothing succeeded")
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

// A reading that gained fewer keys than the answers' own records is
// flagged: the shared cluster lost keys elsewhere meanwhile.
func TestSoldOutRedisReadingDisturbed(t *testing.T) {
	for _, tc := range []struct {
		keys      int64
		own       loadgen.RecordAudit
		disturbed bool
	}{
		{100_050, loadgen.RecordAudit{Checked: 500}, false},
		{96_000, loadgen.RecordAudit{Checked: 500}, false},
		{55_919, loadgen.RecordAudit{Checked: 500}, true},
		{300, loadgen.RecordAudit{Checked: 500, Missing: 500}, false}, // no record per answer: nothing to fall short of
	} {
		p := parts()
		p.SoldOutKeys.Redis.KeysGrowth, p.SoldOutKeys.Redis.Idem = tc.keys, tc.own
		r := Build(p, Machine{})
		if got := r.SoldOutRedis.Disturbed(); got != tc.disturbed {
			t.Errorf("%d keys, own records %+v: disturbed=%v, want %v", tc.keys, tc.own, got, tc.disturbed)
		}
		var b bytes.Buffer
		if err := WriteTable(&b, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "keys elsewhere in the shared cluster"); got != tc.disturbed {
			t.Errorf("%d keys: table flags the reading %v, want %v", tc.keys, got, tc.disturbed)
		}
	}
}
