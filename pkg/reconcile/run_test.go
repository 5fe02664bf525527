package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/reconcile"
)

func TestDryRunChangesNothingButRecords(t *testing.T) {
	e := newEnv(t)
	rec := e.reconciler(reconcile.Options{})
	sku := e.product(10)
	o := ord(sku, 1, 3)
	e.process(o) // invoiced in MySQL; Redis lost both reserve and commit
	before := e.state(sku, o)

	rep := rec.SKU(context.Background(), sku, true)
	if rep.Outcome != admin.SKURepaired || !rep.DryRun || len(rep.Repairs) != 1 {
		t.Fatalf("dry run: %+v, want one repair needed", rep)
	}
	if diff := cmp.Diff([]string{o.ID}, rep.Repairs[0].Committed); diff != "" {
		t.Errorf("would commit (-want +got):\n%s", diff)
	}
	if got := rep.Repairs[0].After; got.Sold != 3 || got.Avail != 7 {
		t.Errorf("would leave %+v, want sold 3 avail 7", got)
	}
	if diff := cmp.Diff(before, e.state(sku, o)); diff != "" {
		t.Errorf("dry run changed Redis (-before +after):\n%s", diff)
	}
	if dry, real := e.repairs(sku, true), e.repairs(sku, false); dry != 1 || real != 0 {
		t.Errorf("recorded %d dry and %d real repairs, want 1 and 0", dry, real)
	}
	if rep := rec.SKU(context.Background(), sku, false); rep.Outcome != admin.SKURepaired {
		t.Fatalf("real run: %s %s", rep.Outcome, rep.Error)
	}
}

// TestWorkerCommitAfterRepair: a worker whose Redis step comes after the
// reconciler committed its order changes nothing (no double count).
func TestWorkerCommitAfterRepair(t *testing.T) {
	e := newEnv(t)
	rec := e.reconciler(reconcile.Options{})
	sku := e.product(10)
	o := ord(sku, 1, 2)
	e.process(o)
	if rep := rec.SKU(context.Background(), sku, false); rep.Outcome != admin.SKURepaired {
		t.Fatalf("reconcile: %s %s", rep.Outcome, rep.Error)
	}
	got, err := e.st.Commit(context.Background(), sku, o.ID, o.Qty)
	if err != nil || got != order.CommittedAlready {
		t.Fatalf("late worker commit: %v %v, want already committed", got, err)
	}
	if s := e.state(sku); s.Sold != 2 || s.Avail != 8 {
		t.Errorf("after late commit: %+v, want sold 2 avail 8", s)
	}
}

func TestBusyWhileAnotherRunHoldsTheSKU(t *testing.T) {
	e := newEnv(t)
	sku := e.product(5)
	locker := reconcile.NewRedisLocker(e.rdb, reconcile.LockOptions{Wait: 100 * time.Millisecond})
	release, err := locker.Lock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	rec := e.reconciler(reconcile.Options{Locker: locker})
	rep := rec.Run(context.Background(), false, sku)
	if rep.SKUs[0].Outcome != admin.SKUBusy || rep.ExitCode != reconcile.ExitBusy {
		t.Fatalf("while locked: %+v, want busy and exit %d", rep, reconcile.ExitBusy)
	}
	if _, err := locker.Lock(context.Background(), sku); !errors.Is(err, reconcile.ErrBusy) {
		t.Fatalf("second lock: %v, want ErrBusy", err)
	}
	release()
	if rep := rec.Run(context.Background(), false, sku); rep.ExitCode != reconcile.ExitConsistent {
		t.Fatalf("after release: %+v, want consistent", rep)
	}
}

func TestRunReportsEverySKUWithExitCode(t *testing.T) {
	e := newEnv(t)
	rec := e.reconciler(reconcile.Options{})
	calm, drifted := e.product(4), e.product(4)
	e.process(ord(drifted, 1, 1))

	rep := rec.Run(context.Background(), false)
	if rep.ExitCode != reconcile.ExitRepaired || rep.Summary[admin.SKUConsistent] != 1 ||
		rep.Summary[admin.SKURepaired] != 1 || len(rep.SKUs) != 2 {
		t.Fatalf("run: %+v, want one consistent, one repaired, exit %d", rep, reconcile.ExitRepaired)
	}
	outcomes := map[string]admin.SKUOutcome{}
	for _, s := range rep.SKUs {
		outcomes[s.SKU] = s.Outcome
	}
	want := map[string]admin.SKUOutcome{calm: admin.SKUConsistent, drifted: admin.SKURepaired}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if rep := rec.Run(context.Background(), false); rep.ExitCode != reconcile.ExitConsistent {
		t.Errorf("second run exit %d, want %d", rep.ExitCode, reconcile.ExitConsistent)
	}
	unknown := rec.Run(context.Background(), false, "no-such-sku")
	if unknown.ExitCode != reconcile.ExitFailed || unknown.SKUs[0].Outcome != admin.SKUFailed ||
		!strings.Contains(unknown.SKUs[0].Error, order.ErrUnknownSKU.Error()) {
		t.Errorf("unknown sku: %+v, want failed", unknown)
	}
}
