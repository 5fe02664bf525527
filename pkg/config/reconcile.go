package config

import "time"

// Reconcile tunes reconciliation wherever it runs (the reconciler's
// schedule and `once`, `opsctl reconcile`, the admin API), so that every
// run judges a SKU alike. Embed it: its variables keep the plain SURGE_
// prefix.
type Reconcile struct {
	// Grace is how long a reservation may wait for its MySQL order before
	// it is released: SURGE_RECONCILE_GRACE, default 5m.
	Grace time.Duration `envconfig:"RECONCILE_GRACE" default:"5m"`
	// Lookback is how far back invoiced orders are checked for a commit
	// Redis lost: SURGE_RECONCILE_LOOKBACK, default 15m.
	Lookback time.Duration `envconfig:"RECONCILE_LOOKBACK" default:"15m"`
}
