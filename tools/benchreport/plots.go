package benchreport

import (
	"fmt"
	"io"
	"math"

	"surge/tools/loadgen"
)

// maxNines caps the percentile axis at 99.999%.
const maxNines = 5.0

// nines maps a percentile to the "number of nines" axis: 90% -> 1,
// 99% -> 2, 99.9% -> 3.
func nines(p float64) float64 {
	if p >= 100 {
		return maxNines
	}
	return math.Min(-math.Log10(1-p/100), maxNines)
}

// WriteLatencySVG plots latency by percentile for each scenario.
func WriteLatencySVG(w io.Writer, p Parts) error {
	type line struct {
		name, color string
		rep         *loadgen.RunReport
	}
	lines := []line{
		{"naive SQL", "#d62728", p.Naive},
		{"surge flash sale", "#1f77b4", p.Flash},
		{"surge flash sale, half rate (open loop)", "#2ca02c", p.FlashHalf},
		{"surge sustained", "#9467bd", p.Sustained},
	}
	lo, hi := math.Inf(1), 0.0
	var series []Series
	for _, l := range lines {
		if l.rep == nil {
			continue
		}
		s := Series{Name: fmt.Sprintf("%s (p99 %.2f ms)", l.name, l.rep.Load.Latency.P99Ms), Color: l.color}
		for _, pt := range l.rep.Load.Latency.Curve {
			ms := math.Max(pt.Ms, 0.01)
			lo, hi = math.Min(lo, ms), math.Max(hi, ms)
			s.Points = append(s.Points, [2]float64{nines(pt.Percentile), ms})
		}
		series = append(series, s)
	}
	if len(series) == 0 {
		return fmt.Errorf("latency plot: no scenario to plot")
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	fmtMs := func(v float64) string { return fmt.Sprintf("%g", v) }
	c := Chart{
		Title: "Order latency by percentile (lower is better)",
		X: Axis{Label: "percentile (right edge: the slowest request)", Min: 0, Max: maxNines, Ticks: []Tick{
			{0, "0%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"}, {4, "99.99%"}, {5, "99.999%"}}},
		Y:      Axis{Label: "latency (ms, log scale)", Min: lo, Max: hi, Log: true, Ticks: logTicks(lo, hi, fmtMs)},
		Series: series,
	}
	return WriteSVG(w, 900, 480, c)
}

// WriteSustainedSVG plots the sustained run's accept and invoice rates and
// the queue depth over time.
func WriteSustainedSVG(w io.Writer, s *Sustained) error {
	if s == nil || len(s.Series) == 0 {
		return fmt.Errorf("sustained plot: no series")
	}
	acc := Series{Name: "accepted/s", Color: "#1f77b4"}
	inv := Series{Name: "invoiced/s", Color: "#ff7f0e"}
	depth := Series{Name: "queue depth (ready messages)", Color: "#7f7f7f"}
	var tMax, rMax, dMax float64
	for _, r := range s.Series {
		acc.Points = append(acc.Points, [2]float64{r.T, r.AcceptedPerS})
		inv.Points = append(inv.Points, [2]float64{r.T, r.InvoicedPerS})
		depth.Points = append(depth.Points, [2]float64{r.T, float64(max(r.QueueDepth, 0))})
		tMax = math.Max(tMax, r.T)
		rMax = math.Max(rMax, math.Max(r.AcceptedPerS, r.InvoicedPerS))
		dMax = math.Max(dMax, float64(r.QueueDepth))
	}
	secs := func(v float64) string { return fmt.Sprintf("%gs", v) }
	rates := Chart{
		Title:  fmt.Sprintf("Sustained load: %s accepted/s, %s invoiced/s", num(s.AcceptedPerS), num(s.InvoicedPerS)),
		X:      Axis{Label: "time (s)", Min: 0, Max: tMax, Ticks: linearTicks(tMax, 10, secs)},
		Y:      Axis{Label: "orders per second", Min: 0, Max: rMax * 1.1, Ticks: linearTicks(rMax*1.1, 5, num)},
		Series: []Series{acc, inv},
	}
	dMax = math.Max(dMax*1.1, 10)
	queue := Chart{
		Title:  "Work queue depth",
		X:      rates.X,
		Y:      Axis{Label: "messages", Min: 0, Max: dMax, Ticks: linearTicks(dMax, 4, num)},
		Series: []Series{depth},
	}
	return WriteSVG(w, 900, 320, rates, queue)
}
