package reconcile

import "surge/pkg/admin"

// Exit codes of `reconciler once` and `opsctl reconcile`, for cron jobs.
// A report's ExitCode tells them apart; the commands exit with
// ExitRepaired only when asked (CommandExit).
const (
	ExitConsistent = 0 // every SKU was consistent (or repaired, unless detailed)
	ExitRepaired   = 1 // repairs were applied (or, in a dry run, are needed)
	ExitFailed     = 2 // at least one SKU failed: see the report
	ExitBusy       = 3 // at least one SKU was busy, none failed: run again
)

func changedAnything(c admin.Changes) bool {
	return len(c.Committed) > 0 || len(c.Released) > 0 || len(c.Republished)+len(c.Unpublished) > 0 ||
		len(c.CustomerCounts) > 0 || c.MaxPerCustomer != nil ||
		c.Before.Loaded != c.After.Loaded ||
		c.Before.Stock != c.After.Stock || c.Before.Sold != c.After.Sold || c.Before.Avail != c.After.Avail
}

// add appends one SKU's account to r and updates the summary and exit
// code.
func add(r *admin.ReconcileReport, s admin.SKUReport) {
	if r.Summary == nil {
		r.Summary = map[admin.SKUOutcome]int{}
	}
	r.Summary[s.Outcome]++
	r.SKUs = append(r.SKUs, s)
	r.ExitCode = exitCode(*r)
}

// Fail records in r a failure that belongs to no single SKU (listing the
// SKUs, connecting to the engines) and marks the report failed.
func Fail(r *admin.ReconcileReport, what string, err error) {
	if r.Errors == nil {
		r.Errors = map[string]string{}
	}
	r.Errors[what] = err.Error()
	if r.Summary == nil {
		r.Summary = map[admin.SKUOutcome]int{}
	}
	r.ExitCode = exitCode(*r)
}

// CommandExit is the exit code of a command that made the report. With
// detailed (--detailed-exitcode) it is ExitCode; without, a run that
// repaired drift (or a dry run that found some) exits ExitConsistent, as
// `terraform plan` exits 0 with changes unless -detailed-exitcode: a cron
// job whose repair worked succeeded, and one that alerts on drift asks for
// the detail. Failed and busy keep their codes either way.
func CommandExit(r admin.ReconcileReport, detailed bool) int {
	if r.ExitCode == ExitRepaired && !detailed {
		return ExitConsistent
	}
	return r.ExitCode
}

func exitCode(r admin.ReconcileReport) int {
	sum := r.Summary
	switch {
	case sum[admin.SKUFailed] > 0 || len(r.Errors) > 0:
		return ExitFailed
	case sum[admin.SKUBusy] > 0:
		return ExitBusy
	case sum[admin.SKURepaired] > 0:
		return ExitRepaired
	}
	return ExitConsistent
}
