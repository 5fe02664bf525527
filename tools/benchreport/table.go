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
	row := func(name string, s *Scenario) {
		if s == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t %s\t %.2f\t %.2f\t %.2f\t %.2f\t %s\t %s\t %s\t %s\t %s\t\n", name, num(s.RPS),
			s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, num(float64(s.Accepted)), num(float64(s.SoldOut)),
			num(float64(s.Other)), num(float64(s.Invoiced)), okOr(s.CheckOK, "FAILED"))
	}
	if s := r.NaiveSQL; s != nil {
		row(fmt.Sprintf("naive SQL, 1 tx/order (c=%d)", s.Concurrency), s)
	}
	if s := r.FlashSale; s != nil {
		row(fmt.Sprintf("surge flash sale (c=%d)", s.Concurrency), s)
	}
	if s := r.FlashSaleHalfRate; s != nil {
		row(fmt.Sprintf("surge flash sale, open loop %s/s", num(s.TargetRate)), s)
	}
	if s := r.Sustained; s != nil {
		row(fmt.Sprintf("surge sustained (c=%d, %.0fs)", s.Concurrency, s.Seconds), &s.Scenario)
	}
	if s := r.SustainedHalfRate; s != nil {
		row(fmt.Sprintf("surge sustained, open loop %s/s", num(s.TargetRate)), s)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range []struct {
		name string
		s    *Scenario
	}{{"naive SQL", r.NaiveSQL}, {"flash sale", r.FlashSale}, {"flash sale, half rate", r.FlashSaleHalfRate}, {"sustained", sustainedScenario(r.Sustained)}, {"sustained, half rate", r.SustainedHalfRate}} {
		if c.s == nil {
			continue
		}
		fmt.Fprintf(w, "CPU during %s: machine %.0f%% busy", c.name, c.s.MachineBusy*100)
		if c.s.LoadgenCPUUS > 0 {
			fmt.Fprintf(w, ", loadgen %.0f us/request", c.s.LoadgenCPUUS)
		}
		if c.s.GatewayCPUUS > 0 {
			fmt.Fprintf(w, ", gateway %.0f us/request, worker %.0f us/request", c.s.GatewayCPUUS, c.s.WorkerCPUUS)
		}
		if c.s.RedisCPUUS > 0 {
			fmt.Fprintf(w, ", redis %.0f, rabbitmq %.0f, mariadb %.0f us/request", c.s.RedisCPUUS, c.s.RabbitCPUUS, c.s.MariaCPUUS)
		}
		if c.s.SendLagP99Ms > 0 {
			fmt.Fprintf(w, "; requests sent late by the generator p50 %.2f ms, p99 %.2f ms", c.s.SendLagP50Ms, c.s.SendLagP99Ms)
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

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
