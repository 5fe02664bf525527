package ops_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/admin"
	"surge/pkg/ops"
	"surge/pkg/order"
	"surge/pkg/store"
)

// scriptedRun answers each SKU with the outcome it was given, and records
// the SKUs it was asked to run.
type scriptedRun struct {
	outcomes map[string]admin.SKUOutcome
	ran      [][]string
}

func (s *scriptedRun) Run(_ context.Context, dryRun bool, skus ...string) admin.ReconcileReport {
	s.ran = append(s.ran, skus)
	rep := admin.ReconcileReport{StartedAt: time.Now(), DryRun: dryRun, Summary: map[admin.SKUOutcome]int{}}
	for _, sku := range skus {
		sr := admin.SKUReport{SKU: sku, Outcome: s.outcomes[sku]}
		if sr.Outcome == admin.SKUFailed {
			sr.Error = "engine down"
		}
		rep.Summary[sr.Outcome]++
		rep.SKUs = append(rep.SKUs, sr)
	}
	return rep
}

// catalogue knows the SKUs of its map; a true value means MySQL fails.
type catalogue map[string]bool

func (c catalogue) Product(_ context.Context, sku string) (store.Product, error) {
	down, ok := c[sku]
	switch {
	case !ok:
		return store.Product{}, fmt.Errorf("read product sku=%s: %w", sku, order.ErrUnknownSKU)
	case down:
		return store.Product{}, errors.New("connection refused")
	}
	return store.Product{SKU: sku}, nil
}

func TestReconcileRequests(t *testing.T) {
	outcomes := map[string]admin.SKUOutcome{"ok": admin.SKUConsistent, "fixed": admin.SKURepaired,
		"busy": admin.SKUBusy, "broken": admin.SKUFailed}
	db := catalogue{"ok": false, "fixed": false, "busy": false, "broken": false, "down": true}
	tests := []struct {
		name string
		skus []string
		ran  [][]string
		want error // nil, or the sentinel err must wrap
	}{
		{"all products", nil, [][]string{{}}, nil},
		{"repeats run once", []string{"fixed", "ok", "fixed"}, [][]string{{"fixed", "ok"}}, nil},
		{"busy", []string{"ok", "busy"}, [][]string{{"ok", "busy"}}, order.ErrConflict},
		{"failed beats busy", []string{"busy", "broken"}, [][]string{{"busy", "broken"}}, order.ErrUnavailable},
		{"invalid sku", []string{"ok", "a b"}, nil, order.ErrInvalid},
		{"unknown sku", []string{"ok", "nope"}, nil, order.ErrUnknownSKU},
		{"mysql down", []string{"down"}, nil, order.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &scriptedRun{outcomes: outcomes}
			rep, err := (&ops.Reconcile{Rec: rec, DB: db}).Run(context.Background(), admin.ReconcileRequest{SKUs: tt.skus})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff(tt.ran, rec.ran); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if started := !rep.StartedAt.IsZero(); started != (tt.ran != nil) {
				t.Errorf("report started %v, want %v", started, tt.ran != nil)
			}
		})
	}
}
