package benchreport

// The targets, as ratios measured in the same run.
const (
	wantFlashVsNaive  = 10.0
	wantHalfRateP99Ms = 5.0
	// wantAcceptingHalfP99Ms is p99 at half the maximum accepting rate.
	wantAcceptingHalfP99Ms = 20.0
	wantAcceptedVsPublish  = 0.70
	wantDrainS             = 2.0
	wantInvoicedVsInsert   = 0.50
	wantPeakRSSMB          = 150.0
	// Other tests share the cluster: a little growth beyond the sale's
	// records is noise, not a leak.
	redisKeysSlackFactor = 1.05
	redisKeysSlack       = 1000
)

func targets(r Results) []Target {
	var out []Target
	add := func(name, want string, got float64, unit string, met bool) {
		out = append(out, Target{Name: name, Want: want, Got: got, Unit: unit, Met: met})
	}
	if r.FlashSale != nil && r.NaiveSQL != nil {
		add("flash sale req/s vs naive SQL", ">= 10x", r.Ratios.FlashVsNaiveRPS, "x", r.Ratios.FlashVsNaiveRPS >= wantFlashVsNaive)
	}
	if h := r.FlashSaleHalfRate; h != nil {
		add("flash sale p99 at half the max rate", "<= 5 ms", h.P99Ms, "ms", h.P99Ms <= wantHalfRateP99Ms && h.Requests > 0)
	}
	if s := r.Sustained; s != nil {
		add("sustained accepted/s vs confirmed-publish ceiling", ">= 0.70", r.Ratios.AcceptedVsPublishCeiling, "",
			r.Ratios.AcceptedVsPublishCeiling >= wantAcceptedVsPublish)
		drain := -1.0
		if s.DrainS != nil {
			drain = *s.DrainS
		}
		add("queue drained after the sustained load", "<= 2 s", drain, "s", drain >= 0 && drain <= wantDrainS)
		add("sustained invoices/s vs batched-insert ceiling", ">= 0.50", r.Ratios.InvoicedVsInsertCeiling, "",
			r.Ratios.InvoicedVsInsertCeiling >= wantInvoicedVsInsert)
	}
	if h := r.SustainedHalfRate; h != nil {
		add("p99 at half the max accepting rate", "<= 20 ms", h.P99Ms, "ms", h.P99Ms <= wantAcceptingHalfP99Ms && h.Accepted > 0)
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
	for _, s := range []*Scenario{r.NaiveSQL, r.FlashSale, r.FlashSaleHalfRate, sustainedScenario(r.Sustained), r.SustainedHalfRate} {
		if s != nil && !s.CheckOK {
			failed++
		}
	}
	add("correctness checks failed", "0", failed, "", failed == 0)
	return out
}

func sustainedScenario(s *Sustained) *Scenario {
	if s == nil {
		return nil
	}
	return &s.Scenario
}
