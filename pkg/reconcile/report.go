package reconcile

import "time"

// Outcome says how reconciling one SKU ended.
type Outcome string

// The outcomes, from the calmest to the most alarming for an operator.
const (
	// Consistent: Redis agreed with MySQL, nothing was changed.
	Consistent Outcome = "consistent"
	// Repaired: repairs were applied (in a dry run: they are needed), and
	// Redis now agrees with MySQL.
	Repaired Outcome = "repaired"
	// Busy: another run held the SKU's lock, or live commits moved sold
	// during every attempt so it could not be verified. Nothing is wrong;
	// the next run finishes the job.
	Busy Outcome = "busy"
	// Failed: an engine failed, or the SKU is unknown to MySQL.
	Failed Outcome = "failed"
)

// Exit codes of `reconciler once` and `opsctl reconcile`, for cron jobs.
// A report's ExitCode tells them apart; the commands exit with
// ExitRepaired only when asked (CommandExit).
const (
	ExitConsistent = 0 // every SKU was consistent (or repaired, unless detailed)
	ExitRepaired   = 1 // repairs were applied (or, in a dry run, are needed)
	ExitFailed     = 2 // at least one SKU failed: see the report
	ExitBusy       = 3 // at least one SKU was busy, none failed: run again
)

// Counters are a SKU's stock keys in Redis. Loaded is false when the SKU
// had no stock key (never loaded, or lost).
type Counters struct {
	Loaded   bool `json:"loaded"`
	Stock    int  `json:"stock"`
	Avail    int  `json:"avail"`
	Sold     int  `json:"sold"`
	Reserved int  `json:"reserved"`
}

// Found is what the reconciler read before repairing a SKU.
type Found struct {
	MySQLStock int      `json:"mysql_stock"`
	MySQLSold  int      `json:"mysql_sold"`
	Redis      Counters `json:"redis"`
	// Reservations is the number of open reservations in Redis.
	Reservations int `json:"reservations"`
	// Compensated counts the accepted orders MySQL rejected within the
	// lookback window (reason sold_out_after_acceptance).
	Compensated int `json:"compensated,omitempty"`
	// Orders says why each order acted upon was chosen: "invoiced"
	// (a reservation, or a commit Redis lost, of an order MySQL invoiced),
	// "rejected", or "no_order" (no MySQL order after the grace period:
	// published again).
	Orders map[string]string `json:"orders,omitempty"`
}

// Changes is what one repair changed in Redis (or would, in a dry run).
type Changes struct {
	// Committed are orders MySQL invoiced whose units were moved to sold.
	Committed []string `json:"committed,omitempty"`
	// Released are reservations whose units went back to avail.
	Released []string `json:"released,omitempty"`
	// Republished are orders with no MySQL order after the grace period,
	// published again so a worker settles them; their units stay reserved.
	Republished []string `json:"republished,omitempty"`
	// Unpublished are such orders whose publish failed: tried again after
	// another grace period.
	Unpublished []string `json:"unpublished,omitempty"`
	// Held are such orders published the most times allowed: reserved
	// until an operator replays or discards their dead letter.
	Held   []string `json:"held,omitempty"`
	Before Counters `json:"before"`
	After  Counters `json:"after"`
	// Aligned is true when stock and sold were set to MySQL's; false when
	// a stock load or a commit raced the repair and they were kept.
	Aligned bool `json:"aligned"`
}

func (c Changes) changedAnything() bool {
	return len(c.Committed) > 0 || len(c.Released) > 0 || len(c.Republished)+len(c.Unpublished) > 0 ||
		c.Before.Loaded != c.After.Loaded ||
		c.Before.Stock != c.After.Stock || c.Before.Sold != c.After.Sold || c.Before.Avail != c.After.Avail
}

// SKUReport is the machine-readable account of one SKU.
type SKUReport struct {
	SKU     string  `json:"sku"`
	Outcome Outcome `json:"outcome"`
	DryRun  bool    `json:"dry_run,omitempty"`
	// Attempts counts the read-plan-apply rounds (a round is repeated when
	// live commits moved sold meanwhile).
	Attempts int `json:"attempts"`
	// Found is what the last round read.
	Found *Found `json:"found,omitempty"`
	// Repairs lists every round that changed something.
	Repairs []Changes `json:"repairs,omitempty"`
	// After is the SKU in Redis after the last round.
	After *Counters `json:"after,omitempty"`
	Error string    `json:"error,omitempty"`
}

// Report is the account of a run over several SKUs.
type Report struct {
	StartedAt  time.Time         `json:"started_at"`
	FinishedAt time.Time         `json:"finished_at"`
	DryRun     bool              `json:"dry_run"`
	Summary    map[Outcome]int   `json:"summary"`
	SKUs       []SKUReport       `json:"skus"`
	ExitCode   int               `json:"exit_code"`
	Errors     map[string]string `json:"errors,omitempty"`
}

// add appends one SKU's account and updates the summary and exit code.
func (r *Report) add(s SKUReport) {
	if r.Summary == nil {
		r.Summary = map[Outcome]int{}
	}
	r.Summary[s.Outcome]++
	r.SKUs = append(r.SKUs, s)
	r.ExitCode = r.exit()
}

// Fail records a failure that belongs to no single SKU (listing the SKUs,
// connecting to the engines) and marks the report failed.
func (r *Report) Fail(what string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	r.Errors[what] = err.Error()
	if r.Summary == nil {
		r.Summary = map[Outcome]int{}
	}
	r.ExitCode = r.exit()
}

// CommandExit is the exit code of a command that made the report. With
// detailed (--detailed-exitcode) it is ExitCode; without, a run that
// repaired drift (or a dry run that found some) exits ExitConsistent, as
// `terraform plan` exits 0 with changes unless -detailed-exitcode: a cron
// job whose repair worked succeeded, and one that alerts on drift asks for
// the detail. Failed and busy keep their codes either way.
func (r Report) CommandExit(detailed bool) int {
	if r.ExitCode == ExitRepaired && !detailed {
		return ExitConsistent
	}
	return r.ExitCode
}

func (r *Report) exit() int {
	sum := r.Summary
	switch {
	case sum[Failed] > 0 || len(r.Errors) > 0:
		return ExitFailed
	case sum[Busy] > 0:
		return ExitBusy
	case sum[Repaired] > 0:
		return ExitRepaired
	}
	return ExitConsistent
}
