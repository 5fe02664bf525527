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

// WriteLatencySVG plots latency by percentile for the closed loops and the
// open loops at half of each path's maximum.
func WriteLatencySVG(w io.Writer, p Parts) error {
	type line struct {
		name, color string
		rep         *loadgen.RunReport
	}
	half := func(path string) *loadgen.RunReport { return p.Open[OpenKey{Path: path, Percent: halfPercent}] }
	lines := []line{
		{"naive SQL", "#d62728", p.Naive},
		{"surge flash sale", "#1f77b4", p.Flash},
		{"surge sold out, 50% of its max (open loop)", "#2ca02c", half(PathSoldOut)},
		{"floor, same rate (open loop)", "#7f7f7f", half(PathFloor)},
		{"surge sustained", "#9467bd", p.Sustained},
		{"surge accepting, 50% of its max (open loop)", "#ff7f0e", half(PathAccepting)},
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

// WriteOpenLoopSVG plots p99 against the share of each path's maximum:
// surge's sold-out answers, the floor at the same rates, and the
// accepting path, with the targets at half the maximum.
func WriteOpenLoopSVG(w io.Writer, r Results) error {
	var soldOut, floor, accepting Series
	soldOut = Series{Name: "surge sold out", Color: "#2ca02c"}
	floor = Series{Name: "floor at the same rates", Color: "#7f7f7f"}
	accepting = Series{Name: "surge accepting (share of its own max)", Color: "#ff7f0e"}
	lo, hi := math.Inf(1), 0.0
	point := func(s *Series, pct int, sc *Scenario) {
		if sc == nil {
			return
		}
		ms := math.Max(sc.P99Ms, 0.01)
		lo, hi = math.Min(lo, ms), math.Max(hi, ms)
		s.Points = append(s.Points, [2]float64{float64(pct), ms})
	}
	if r.SoldOut != nil {
		for _, pt := range r.SoldOut.OpenLoop {
			point(&soldOut, pt.Percent, pt.Surge)
			point(&floor, pt.Percent, pt.Floor)
		}
	}
	for _, pt := range r.AcceptingOpenLoop {
		point(&accepting, pt.Percent, pt.Surge)
	}
	if len(soldOut.Points)+len(accepting.Points) == 0 {
		return fmt.Errorf("open-loop plot: no open loop to plot")
	}
	lo = math.Pow(10, math.Floor(math.Log10(math.Min(lo, wantSoldOutHalfP99Ms))))
	hi = math.Pow(10, math.Ceil(math.Log10(math.Max(hi, wantAcceptingHalfP99Ms))))
	target := func(name, color string, ms float64) Series {
		return Series{Name: name, Color: color, Points: [][2]float64{{40, ms}, {60, ms}}}
	}
	pct := func(v float64) string { return fmt.Sprintf("%g%%", v) }
	c := Chart{
		Title: "p99 by offered rate, latency from when each request was due (lower is better)",
		X:     Axis{Label: "rate offered, share of the path's own maximum", Min: 0, Max: 100, Ticks: linearTicks(100, 10, pct)},
		Y:     Axis{Label: "p99 (ms, log scale)", Min: lo, Max: hi, Log: true, Ticks: logTicks(lo, hi, func(v float64) string { return fmt.Sprintf("%g", v) })},
		Series: []Series{soldOut, floor, accepting,
			target("target, sold out at 50%: 5 ms", "#98df8a", wantSoldOutHalfP99Ms),
			target("target, accepting at 50%: 20 ms", "#ffbb78", wantAcceptingHalfP99Ms)},
	}
	return WriteSVG(w, 900, 420, c)
}
