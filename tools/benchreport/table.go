package benchreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the results as one plain-text table: the scenarios,
// the raw ceilings, memory, and each target met or missed.
func WriteTable(w io.Writer, r Results) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	m := r.Machine
	fmt.Fprintf(w, "surge benchmark: %d CPUs (%s), %d MB, Linux %s, %s, %s\n", m.CPUs, m.CPUModel, m.MemoryMB, m.Kernel, m.GoVersion, m.At)
	for _, v := range m.Versions {
		fmt.Fprintf(w, "  %s\n", v)
	}
	if m.LoadBefore != "" || m.LoadAvg != "" {
		fmt.Fprintf(w, "  load average before the run %s, at its end %s (the machine is shared)\n", m.LoadBefore, m.LoadAvg)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "scenario\t req/s\t p50 ms\t p90 ms\t p99 ms\t p99.9 ms\t accepted\t sold out\t other\t invoiced\t check\t")
	rows := r.rows()
	for _, row := range rows {
		s := row.s
		fmt.Fprintf(tw, "%s\t %s\t %.2f\t %.2f\t %.2f\t %.2f\t %s\t %s\t %s\t %s\t %s\t\n", row.name, num(s.RPS),
			s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, num(float64(s.Accepted)), num(float64(s.SoldOut)),
			num(float64(s.Other)), num(float64(s.Invoiced)), checkVerdict(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		if row.cpu == "" {
			continue
		}
		s := row.s
		fmt.Fprintf(w, "CPU during %s: machine %.0f%% busy", row.cpu, s.MachineBusy*100)
		if s.LoadgenCPUUS > 0 {
			fmt.Fprintf(w, ", loadgen %.0f us/request", s.LoadgenCPUUS)
		}
		if s.FloorCPUUS > 0 {
			fmt.Fprintf(w, ", floor %.0f us/request", s.FloorCPUUS)
		}
		if s.GatewayCPUUS > 0 {
			fmt.Fprintf(w, ", gateway %.0f us/request, worker %.0f us/request", s.GatewayCPUUS, s.WorkerCPUUS)
		}
		if s.RedisCPUUS > 0 {
			fmt.Fprintf(w, ", redis %.0f, rabbitmq %.0f, mariadb %.0f us/request", s.RedisCPUUS, s.RabbitCPUUS, s.MariaCPUUS)
		}
		if s.SendLagP99Ms > 0 {
			fmt.Fprintf(w, "; requests sent late by the generator p50 %.2f ms, p99 %.2f ms", s.SendLagP50Ms, s.SendLagP99Ms)
		}
		fmt.Fprintln(w)
	}
	if s := r.Sustained; s != nil {
		drain := "never"
		if s.DrainS != nil && *s.DrainS >= 0 {
			drain = fmt.Sprintf("%.2f s", *s.DrainS)
		}
		fmt.Fprintf(w, "\nsustained: %s accepted/s, %s invoices/s, max queue depth %s, drained %s after the load\n",
			num(s.AcceptedPerS), num(s.InvoicedPerS), num(float64(s.MaxQueueDepth)), drain)
		if c := s.CPU; c != nil {
			fmt.Fprintf(w, "CPU per accepted order: gateway %.0f, worker %.0f, redis %.0f, rabbitmq %.0f, mariadb %.0f us; "+
				"pipeline_cpu_us_per_accepted %.0f at %s accepted/s\n",
				c.Gateway, c.Worker, c.Redis, c.RabbitMQ, c.MariaDB, c.Pipeline, num(s.AcceptedPerS))
		}
	}
	writeSoldOut(w, r)
	fmt.Fprintf(w, "\nraw ceilings on this machine:\n  reserve.lua by EVALSHA on one SKU   %s/s (pipelined: %s/s)\n"+
		"  confirmed persistent publishes      %s/s\n  batched invoice inserts             %s rows/s\n"+
		"  HTTP to an empty handler            %s req/s\n",
		num(r.Raw.RedisEvalshaPerS), num(r.Raw.RedisEvalshaPipelinedPerS), num(r.Raw.AMQPConfirmedPublishPerS), num(r.Raw.MySQLBatchInsertPerS),
		num(r.Raw.HTTPEmptyHandlerPerS))
	if mem := r.Memory; mem != nil {
		fmt.Fprintf(w, "\nmemory under the flash sale: gateway peak RSS %.1f MB, worker %.1f MB; Redis used_memory %+.1f MB, "+
			"keys %+d for the sale's %s records (%.0f B per key; records expire within %.0f s, %d sampled without TTL)\n",
			mem.GatewayPeakRSSMB, mem.WorkerPeakRSSMB, float64(mem.RedisGrowth)/(1<<20), mem.KeysGrowth,
			num(float64(mem.RecordKeys)), mem.BytesPerKey, mem.RecordsTTLSec, mem.RecordsNoTTL)
		if mem.KeysGrowth < 0 {
			fmt.Fprintln(w, "  (fewer keys after the sale than before: older keys expired during it, so this reading needs a cluster with nothing else expiring)")
		}
	}
	fmt.Fprintln(w, "\ntargets:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "  %s\t%s\t%s %s\t%s\n", t.Name, t.Want, strconv.FormatFloat(t.Got, 'f', -1, 64), t.Unit, okOr(t.Met, "MISSED"))
	}
	return tw.Flush()
}

// row is one line of the table; cpu, when set, names its CPU line.
type row struct {
	name, cpu string
	s         *Scenario
}

// rows are the run's scenarios in the order they ran: the naive path and
// the flash sale, the sold-out closed loops (surge, then the floor) and
// open loops (surge and the floor at each rate), the sustained load and
// its open loops, and the sold-out answers Redis was read around. Each
// closed loop and each 50% point has its CPU line.
func (r Results) rows() []row {
	var out []row
	add := func(s *Scenario, cpu, format string, args ...any) {
		if s != nil {
			out = append(out, row{name: fmt.Sprintf(format, args...), cpu: cpu, s: s})
		}
	}
	if s := r.NaiveSQL; s != nil {
		add(s, "naive SQL", "naive SQL, 1 tx/order (c=%d)", s.Concurrency)
	}
	if s := r.FlashSale; s != nil {
		add(s, "flash sale", "surge flash sale (c=%d)", s.Concurrency)
	}
	if so := r.SoldOut; so != nil {
		if s := so.Surge; s != nil {
			add(s, "sold out, surge", "surge sold out (c=%d, %.0fs)", s.Concurrency, s.Seconds)
		}
		if s := so.Floor; s != nil {
			add(s, "sold out, floor", "floor sold out (c=%d, %.0fs)", s.Concurrency, s.Seconds)
		}
		for _, pt := range so.OpenLoop {
			surgeCPU, floorCPU := "", ""
			if pt.Percent == halfPercent {
				surgeCPU, floorCPU = "sold out at 50%, surge", "sold out at 50%, floor"
			}
			add(pt.Surge, surgeCPU, "surge sold out, %d%% = %s/s", pt.Percent, num(pt.Rate))
			add(pt.Floor, floorCPU, "floor sold out, %d%% = %s/s", pt.Percent, num(pt.Rate))
		}
	}
	if s := r.Sustained; s != nil {
		add(&s.Scenario, "sustained", "surge sustained (c=%d, %.0fs)", s.Concurrency, s.Seconds)
	}
	for _, pt := range r.AcceptingOpenLoop {
		cpu := ""
		if pt.Percent == halfPercent {
			cpu = "accepting at 50%"
		}
		add(pt.Surge, cpu, "surge accepting, %d%% = %s/s", pt.Percent, num(pt.Rate))
	}
	if k := r.SoldOutRedis; k != nil && k.Load != nil {
		add(k.Load, "", "surge sold out, Redis read (c=%d)", k.Load.Concurrency)
	}
	return out
}

// scenarios are the run's scenarios, in the table's order.
func (r Results) scenarios() []*Scenario {
	var out []*Scenario
	for _, row := range r.rows() {
		out = append(out, row.s)
	}
	return out
}

// writeSoldOut prints the sold-out path against the floor, the accepting
// path's latency by rate, and what sold-out answers left in Redis.
func writeSoldOut(w io.Writer, r Results) {
	if so := r.SoldOut; so != nil {
		fmt.Fprintln(w)
		if so.Surge != nil && so.Floor != nil {
			fmt.Fprintf(w, "sold out vs the floor (same decode, same 409, no engine): closed loop %s vs %s answers/s, %.2f of the floor\n",
				num(so.Surge.RPS), num(so.Floor.RPS), r.Ratios.SoldOutVsFloorRPS)
		}
		if len(so.OpenLoop) > 0 {
			fmt.Fprint(w, "  p99 at shares of surge's max, surge vs the floor at the same rate:")
			for i, pt := range so.OpenLoop {
				fmt.Fprintf(w, "%s %d%% %.2f vs %s ms", sep(i), pt.Percent, pt.Surge.P99Ms, floorP99(pt))
				if pt.Floor != nil {
					fmt.Fprintf(w, " (%.1fx)", pt.P99VsFloor)
				}
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.AcceptingOpenLoop) > 0 {
		fmt.Fprint(w, "accepting path")
		if s := r.Sustained; s != nil {
			fmt.Fprintf(w, " (max %s accepted/s, sustained)", num(s.AcceptedPerS))
		}
		fmt.Fprint(w, ": p99 at shares of its max:")
		for i, pt := range r.AcceptingOpenLoop {
			fmt.Fprintf(w, "%s %d%% %.2f ms", sep(i), pt.Percent, pt.Surge.P99Ms)
		}
		fmt.Fprintln(w)
	}
	if k := r.SoldOutRedis; k != nil {
		fmt.Fprintf(w, "Redis per 100,000 sold-out answers: %s keys, %+.1f MB (per answer %.4f keys, %.0f B); "+
			"read over %s answers", signed(k.KeysPer100k), k.BytesPer100k/(1<<20), k.KeysPerAnswer, k.BytesPerAnswer, num(float64(k.Answers)))
		if k.Other > 0 {
			fmt.Fprintf(w, " and %s other answers", num(float64(k.Other)))
		}
		fmt.Fprintf(w, ", %d sampled records without TTL; the answers' own records, sampled: %.2f per answer\n",
			k.RecordsNoTTL, k.OwnRecordsPerAnswer)
		if k.Disturbed() {
			fmt.Fprintln(w, "  (fewer keys than the answers' own records: keys elsewhere in the shared cluster were deleted or expired during the reading)")
		}
	}
}

func sep(i int) string {
	if i == 0 {
		return ""
	}
	return ","
}

func floorP99(pt OpenPoint) string {
	if pt.Floor == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", pt.Floor.P99Ms)
}

// checkVerdict is the table's check column: "-" when nothing was checked.
func checkVerdict(s *Scenario) string {
	if s.Check == "" {
		return "-"
	}
	return okOr(s.CheckOK, "FAILED")
}

func okOr(ok bool, bad string) string {
	if ok {
		return "ok"
	}
	return bad
}

// num formats v rounded, with thousands separators.
func num(v float64) string {
	s := strconv.FormatInt(int64(v+0.5*sign(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// signed is num with a sign: "+1,200", "-3".
func signed(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
