package benchreport

import "fmt"

// The targets, each a figure or a ratio measured in the same run. The
// first six are about the sold-out path: its answers against the floor's
// and the flash sale against the naive path, p99 at half of each path's
// own maximum (sold out, and accepting), and what a sold-out answer leaves
// in Redis. The others are earlier targets that none of these replaces.
const (
	wantSoldOutVsFloor = 0.70
	wantFlashVsNaive   = 8.0
	// wantSoldOutHalfP99Ms and wantSoldOutHalfP99VsFloor are at half of
	// surge's sold-out maximum; the floor runs at the same rate.
	wantSoldOutHalfP99Ms      = 5.0
	wantSoldOutHalfP99VsFloor = 3.0
	wantKeysPerSoldOut        = 0.01
	// wantAcceptingHalfP99Ms is p99 at half the maximum accepting rate.
	wantAcceptingHalfP99Ms = 20.0

	wantAcceptedVsPublish = 0.70
	wantDrainS            = 2.0
	wantInvoicedVsInsert  = 0.50
	wantPeakRSSMB         = 150.0
	// Other tests share the cluster: a little growth beyond the sale's
	// records is noise, not a leak.
	redisKeysSlackFactor = 1.05
	redisKeysSlack       = 1000
)

// targets lists each target the run has the parts for. A sold-out target
// counts as met only when the runs it reads were answered 409 throughout:
// a fast refusal of another kind is not a sold-out answer.
func targets(r Results) []Target {
	var out []Target
	add := func(name, want string, got float64, unit string, met bool) {
		out = append(out, Target{Name: name, Want: want, Got: got, Unit: unit, Met: met})
	}
	if so := r.SoldOut; so != nil && so.Surge != nil && so.Floor != nil {
		got := r.Ratios.SoldOutVsFloorRPS
		add("sold-out answers/s vs the floor, closed loop", fmt.Sprintf(">= %.2f", wantSoldOutVsFloor), got, "",
			got >= wantSoldOutVsFloor && so.Surge.CheckOK && so.Floor.CheckOK)
	}
	if r.FlashSale != nil && r.NaiveSQL != nil {
		add("flash sale req/s vs naive SQL", fmt.Sprintf(">= %gx", wantFlashVsNaive), r.Ratios.FlashVsNaiveRPS, "x",
			r.Ratios.FlashVsNaiveRPS >= wantFlashVsNaive)
	}
	if r.SoldOut != nil {
		if pt := at(r.SoldOut.OpenLoop, halfPercent); pt != nil {
			s := pt.Surge
			add("sold-out p99 at 50% of its max", fmt.Sprintf("<= %g ms", wantSoldOutHalfP99Ms), s.P99Ms, "ms",
				s.P99Ms <= wantSoldOutHalfP99Ms && s.CheckOK)
			if f := pt.Floor; f != nil {
				add("sold-out p99 at 50% vs the floor's at that rate", fmt.Sprintf("<= %gx", wantSoldOutHalfP99VsFloor), pt.P99VsFloor, "x",
					pt.P99VsFloor <= wantSoldOutHalfP99VsFloor && s.CheckOK && f.CheckOK && f.P99Ms > 0)
			}
		}
	}
	if k := r.SoldOutRedis; k != nil {
		add("Redis keys added per sold-out answer", fmt.Sprintf("<= %g", wantKeysPerSoldOut), k.KeysPerAnswer, "",
			k.KeysPerAnswer <= wantKeysPerSoldOut && k.Answers > 0 && k.Other == 0)
	}
	if pt := at(r.AcceptingOpenLoop, halfPercent); pt != nil {
		h := pt.Surge
		add("accepting p99 at 50% of its max", fmt.Sprintf("<= %g ms", wantAcceptingHalfP99Ms), h.P99Ms, "ms",
			h.P99Ms <= wantAcceptingHalfP99Ms && h.Accepted > 0)
	}
	if s := r.Sustained; s != nil {
		drain := -1.0
		if s.DrainS != nil {
			drain = *s.DrainS
		}
		add("queue drained after the sustained load", "<= 2 s", drain, "s", drain >= 0 && drain <= wantDrainS)
		add("sustained accepted/s vs confirmed-publish ceiling", ">= 0.70", r.Ratios.AcceptedVsPublishCeiling, "",
			r.Ratios.AcceptedVsPublishCeiling >= wantAcceptedVsPublish)
		add("sustained invoices/s vs batched-insert ceiling", ">= 0.50", r.Ratios.InvoicedVsInsertCeiling, "",
			r.Ratios.InvoicedVsInsertCeiling >= wantInvoicedVsInsert)
	}
	if m := r.Memory; m != nil {
		add("gateway peak RSS under the flash sale", "<= 150 MB", m.GatewayPeakRSSMB, "MB",
			m.GatewayPeakRSSMB > 0 && m.GatewayPeakRSSMB <= wantPeakRSSMB)
		add("worker peak RSS under the flash sale", "<= 150 MB", m.WorkerPeakRSSMB, "MB",
			m.WorkerPeakRSSMB > 0 && m.WorkerPeakRSSMB <= wantPeakRSSMB)
		if m.RecordKeys > 0 {
			growth := ratio(float64(m.KeysGrowth), float64(m.RecordKeys))
			add("Redis keys after the sale vs its expiring records", "<= 1.05x, all expire", growth, "x",
				m.RecordsNoTTL == 0 && float64(m.KeysGrowth) <= float64(m.RecordKeys)*redisKeysSlackFactor+redisKeysSlack)
		}
	}
	failed := 0.0
	for _, s := range r.scenarios() {
		if s.Check != "" && !s.CheckOK {
			failed++
		}
	}
	add("correctness checks failed", "0", failed, "", failed == 0)
	return out
}
