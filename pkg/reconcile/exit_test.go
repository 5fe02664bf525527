package reconcile_test

import (
	"testing"

	"surge/pkg/admin"
	"surge/pkg/reconcile"
)

// TestCommandExit: a repair exits 1 only when the detail is asked for;
// failed and busy keep their codes.
func TestCommandExit(t *testing.T) {
	for _, c := range []struct{ code, plain, detailed int }{
		{reconcile.ExitConsistent, 0, 0},
		{reconcile.ExitRepaired, 0, 1},
		{reconcile.ExitFailed, 2, 2},
		{reconcile.ExitBusy, 3, 3},
	} {
		rep := admin.ReconcileReport{ExitCode: c.code}
		if got := reconcile.CommandExit(rep, false); got != c.plain {
			t.Errorf("report exit %d: command exit %d, want %d", c.code, got, c.plain)
		}
		if got := reconcile.CommandExit(rep, true); got != c.detailed {
			t.Errorf("report exit %d with --detailed-exitcode: %d, want %d", c.code, got, c.detailed)
		}
	}
}
