package metrics

import (
	"fmt"
	"time"

	"surge/pkg/admin"
)

// Drift kinds the reconciler reports. Other kinds are accepted; these are
// the ones created at zero and drawn on the dashboard.
const (
	// DriftCommitMissing: a reservation whose invoice already exists in
	// MySQL (the commit script never ran, or a failover lost it).
	DriftCommitMissing = "commit_missing"
	// DriftStaleReservation: a reservation with no MySQL order past the
	// grace period (its order is published again, never released).
	DriftStaleReservation = "stale_reservation"
	// DriftSoldMismatch: Redis's sold counter differs from MySQL's.
	DriftSoldMismatch = "sold_mismatch"
	// DriftStockMismatch: Redis's total stock differs from MySQL's.
	DriftStockMismatch = "stock_mismatch"
	// DriftNotLoaded: a product MySQL sells has no stock in Redis.
	DriftNotLoaded = "not_loaded"
)

// ReconcileDrift counts one difference between Redis and MySQL found by the
// reconciler. Log the SKU beside it: it is not a label.
func ReconcileDrift(kind string) { reconcileDrift.WithLabelValues(kind).Inc() }

// ReconcileRepaired counts one difference the reconciler repaired.
func ReconcileRepaired(kind string) { reconcileRepairs.WithLabelValues(kind).Inc() }

// ReconcileReport records one reconciler pass from its report: the drift
// it found and repaired by kind, its duration, and its success (a pass
// with a failed SKU or a run-level error is an error).
func ReconcileReport(rep admin.ReconcileReport) {
	for _, s := range rep.SKUs {
		for _, ch := range s.Repairs {
			for _, kind := range driftOf(ch) {
				ReconcileDrift(kind)
				if !rep.DryRun {
					ReconcileRepaired(kind)
				}
			}
		}
	}
	var err error
	if len(rep.Errors) > 0 || rep.Summary[admin.SKUFailed] > 0 {
		err = fmt.Errorf("reconcile pass: %d failed SKUs, %d run errors", rep.Summary[admin.SKUFailed], len(rep.Errors))
	}
	ReconcileRun(rep.FinishedAt.Sub(rep.StartedAt), err)
}

// driftOf names the kinds of drift one round of repairs fixed.
func driftOf(ch admin.Changes) []string {
	var kinds []string
	add := func(kind string, n int) {
		for range n {
			kinds = append(kinds, kind)
		}
	}
	add(DriftCommitMissing, len(ch.Committed))
	add(DriftStaleReservation, len(ch.Republished))
	switch {
	case !ch.Before.Loaded && ch.After.Loaded:
		add(DriftNotLoaded, 1)
	case ch.Before.Stock != ch.After.Stock:
		add(DriftStockMismatch, 1)
	}
	if ch.Before.Loaded && ch.Before.Sold != ch.After.Sold && len(ch.Committed) == 0 {
		add(DriftSoldMismatch, 1) // sold set to MySQL's with no commit to explain it
	}
	return kinds
}

// ReconcileRun records one reconciler pass: its duration and whether it
// ended with an error. A pass without error also sets the last-success
// timestamp that the staleness alert watches.
func ReconcileRun(took time.Duration, err error) {
	reconcileDuration.Observe(took.Seconds())
	if err != nil {
		reconcileRuns.WithLabelValues("error").Inc()
		return
	}
	reconcileRuns.WithLabelValues("ok").Inc()
	reconcileLastSuccess.SetToCurrentTime()
}

// Lock attempt results.
const (
	LockAcquired  = "acquired"
	LockContended = "contended"
	LockError     = "error"
)

// lockAttempt records one attempt to take a distributed lock: result is
// LockAcquired, LockContended (another owner holds it) or LockError, and
// wait the time the attempt took, retries included.
func lockAttempt(result string, wait time.Duration) {
	lockAcquisitions.WithLabelValues(result).Inc()
	lockWait.Observe(wait.Seconds())
}

// CacheHit counts a product read served from the cache.
func CacheHit() { cacheRequests.WithLabelValues("hit").Inc() }

// CacheMiss counts a product read the cache could not serve.
func CacheMiss() { cacheRequests.WithLabelValues("miss").Inc() }

// CacheRead counts a read as a hit or a miss (cache.Options.OnGet).
func CacheRead(hit bool) {
	if hit {
		CacheHit()
		return
	}
	CacheMiss()
}

// CacheRebuilt counts one rebuild of a cached product view; err is the
// rebuild's failure, if any.
func CacheRebuilt(err error) {
	if err != nil {
		cacheRebuilds.WithLabelValues("error").Inc()
		return
	}
	cacheRebuilds.WithLabelValues("ok").Inc()
}
