package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/reconcile"
	"surge/pkg/store"
)

// Reconciler runs a reconciliation. *reconcile.Reconciler implements it.
type Reconciler interface {
	Run(ctx context.Context, dryRun bool, skus ...string) admin.ReconcileReport
}

var _ Reconciler = (*reconcile.Reconciler)(nil)

// ProductLookup finds a product in MySQL, failing wrapping
// order.ErrUnknownSKU when there is none. *store.Store implements it.
type ProductLookup interface {
	Product(ctx context.Context, sku string) (store.Product, error)
}

var _ ProductLookup = (*store.Store)(nil)

// Reconcile runs the reconciler on demand (opsctl reconcile, the admin
// API), the way `reconciler once` does from cron.
type Reconcile struct {
	Rec Reconciler
	DB  ProductLookup
}

// Run checks the request and that MySQL knows every SKU it names, then
// reconciles them one at a time and returns the report.
//
// When the run does not start, the report is zero (StartedAt is zero) and
// err says why, nothing having been changed: an invalid SKU wraps
// order.ErrInvalid, a SKU MySQL does not know wraps order.ErrUnknownSKU,
// MySQL failing wraps order.ErrUnavailable. After a run, err is nil when
// every SKU ended consistent or repaired; otherwise it comes beside the
// report and wraps order.ErrUnavailable when a SKU or the run failed, or
// order.ErrConflict when SKUs were busy and none failed (run again).
func (s *Reconcile) Run(ctx context.Context, req admin.ReconcileRequest) (admin.ReconcileReport, error) {
	if err := req.Validate(); err != nil {
		return admin.ReconcileReport{}, err
	}
	skus := distinct(req.SKUs)
	for _, sku := range skus {
		_, err := s.DB.Product(ctx, sku)
		switch {
		case errors.Is(err, order.ErrUnknownSKU):
			return admin.ReconcileReport{}, fmt.Errorf("sku %q: %w", sku, order.ErrUnknownSKU)
		case err != nil:
			return admin.ReconcileReport{}, fmt.Errorf("check sku=%s in MySQL: %w: %w", sku, order.ErrUnavailable, err)
		}
	}
	if req.Actor != "" {
		ctx = reconcile.WithOperator(ctx, req.Actor)
	}
	rep := s.Rec.Run(ctx, req.DryRun, skus...)
	return rep, reportError(rep)
}

// reportError is nil for a run that left every SKU consistent with MySQL.
func reportError(rep admin.ReconcileReport) error {
	var failed, busy []string
	for _, s := range rep.SKUs {
		switch s.Outcome {
		case admin.SKUFailed:
			failed = append(failed, fmt.Sprintf("sku=%s: %s", s.SKU, s.Error))
		case admin.SKUBusy:
			busy = append(busy, s.SKU)
		}
	}
	for _, what := range slices.Sorted(maps.Keys(rep.Errors)) {
		failed = append(failed, what+": "+rep.Errors[what])
	}
	switch {
	case len(failed) > 0:
		return fmt.Errorf("reconcile: %w: %s", order.ErrUnavailable, strings.Join(failed, "; "))
	case len(busy) > 0:
		return fmt.Errorf("reconcile: %w: busy, run again: %s", order.ErrConflict, strings.Join(busy, ", "))
	}
	return nil
}

// distinct drops repeated SKUs, keeping the first occurrence's place.
func distinct(skus []string) []string {
	seen := make(map[string]bool, len(skus))
	out := make([]string, 0, len(skus))
	for _, s := range skus {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
