//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"surge/internal/testenv"
	"surge/internal/testkit"
	"surge/pkg/admin"
	"surge/pkg/reconcile"
)

// measurements collects the outage of each failover, printed by TestMain.
var measurements []string

func report(t *testing.T, what string, s *sale, t0 time.Time, promoted time.Time) {
	t.Helper()
	o, ok := s.outage(t0)
	if !ok {
		t.Errorf("%s: no order was accepted after the fault", what)
		return
	}
	line := fmt.Sprintf("%s: replica promoted %.1fs after the fault; gateway unavailable for the SKU %.1fs "+
		"(first write %.1fs after the promotion; %d attempts answered 503, %d broken); slowest request %.1fs",
		what, promoted.Sub(t0).Seconds(), o.Window.Seconds(), max(0, o.Window-promoted.Sub(t0)).Seconds(),
		o.Refused, o.Broken, o.Slowest.Seconds())
	t.Log(line)
	measurements = append(measurements, line)
}

// TestLostWritesHealedByReconciler is the lost-writes failover the README's
// Reconciler section describes: the
// replica of the SKU's master is stopped and its link cut, more orders are
// accepted and invoiced on the master alone, the master is killed and the
// stale replica promoted. The sale goes on past the real stock, then the
// reconciler runs.
func TestLostWritesHealedByReconciler(t *testing.T) {
	const stock = 300
	ctx := context.Background()
	f := startFailover(t, "chaos-lost-", stock, 60)
	p, sku, s, slot, master, replica := f.p, f.sku, f.s, f.slot, f.master, f.replica

	priv.signal(t, replica, syscall.SIGSTOP)
	if err := priv.node(t, master).ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		priv.signal(t, replica, syscall.SIGCONT)
		t.Fatalf("cut the replica link: %v", err)
	}
	soldAtCut := p.mysqlSold(sku)
	p.waitSold(sku, soldAtCut+30, 30*time.Second)

	priv.signal(t, master, syscall.SIGKILL)
	t0, dbT0 := time.Now(), p.dbNow()
	soldAtKill := p.mysqlSold(sku)
	priv.signal(t, replica, syscall.SIGCONT)
	promoted := priv.waitPromoted(t, slot, master, replica)
	dbPromoted := p.dbNow()

	// The loss is real: once every order is settled and every retried
	// commit landed, Redis still misses the units whose commits only the
	// dead master had.
	f.finish(t, "lost writes (replica link cut, master SIGKILLed)", t0, promoted)
	retried := p.checkCommitsRetried(sku, p.invoicedBetween(sku, dbT0, dbPromoted))
	v, err := p.stock.View(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if mysql := p.mysqlSold(sku); v.Sold >= mysql {
		t.Fatalf("redis sold %d after the failover, mysql sold %d: no write was lost, the scenario did not happen",
			v.Sold, mysql)
	}
	rep := p.reconciler().Run(ctx, false, sku)
	if rep.ExitCode != reconcile.ExitRepaired {
		t.Fatalf("reconcile: exit %d, want %d (repaired): %+v", rep.ExitCode, reconcile.ExitRepaired, rep.SKUs)
	}
	t.Logf("lost at the cut: %d units invoiced on the master alone; %d orders invoiced during the outage had "+
		"their commit retried onto the new master; before reconcile: redis sold %d avail %d reserved %d, "+
		"mysql sold %d; repairs: %s", soldAtKill-soldAtCut, retried, v.Sold, v.Avail, v.Reserved, p.mysqlSold(sku), describe(rep))
	p.checkSale(sku, stock, s)
}

// TestPausedMasterLosesNoAcceptedOrder pauses the SKU's master past the
// node timeout while requests are in flight, resumes it once its replica
// was promoted (it acknowledges what it had queued, then turns replica
// and drops it), and checks that no order answered 202 is lost.
func TestPausedMasterLosesNoAcceptedOrder(t *testing.T) {
	const stock = 200
	ctx := context.Background()
	f := startFailover(t, "chaos-pause-", stock, 50)
	p, sku, s, slot, master, replica := f.p, f.sku, f.s, f.slot, f.master, f.replica

	priv.signal(t, master, syscall.SIGSTOP)
	t0, dbT0 := time.Now(), p.dbNow()
	promoted := priv.waitPromoted(t, slot, master, replica)
	dbPromoted := p.dbNow()
	priv.signal(t, master, syscall.SIGCONT)
	testkit.WaitFor(t, "the old master to turn replica", 30*time.Second, func() (bool, error) {
		role, err := priv.node(t, master).Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "slave", err
	})

	f.finish(t, "master paused past the node timeout", t0, promoted)
	// The paused master may have acknowledged commits on resume, before it
	// learnt it was demoted, and dropped them: the reconciler heals those.
	lost, err := p.uncommitted(sku, p.invoicedBetween(sku, dbT0, dbPromoted))
	if err != nil {
		t.Fatal(err)
	}
	rep := p.reconciler().Run(ctx, false, sku)
	if rep.ExitCode == reconcile.ExitFailed || rep.ExitCode == reconcile.ExitBusy {
		t.Fatalf("reconcile: exit %d: %+v", rep.ExitCode, rep.SKUs)
	}
	t.Logf("orders invoiced during the pause and not committed in Redis after the drain: %v; reconcile: %s",
		lost, describe(rep))
	p.checkSale(sku, stock, s)
}

// failover is a sale under way on a SKU of the private cluster, whose
// master and replica a test is about to fault.
type failover struct {
	p               *pipeline
	sku             string
	stock           int
	slot            int
	master, replica int
	s               *sale
	stop            func()
}

// startFailover loads stock units of a new SKU, starts a steady sale on it
// and returns once soldBefore were invoiced, so the fault hits a sale under
// way. The cluster is healed at cleanup.
func startFailover(t *testing.T, prefix string, stock, soldBefore int) *failover {
	t.Helper()
	f := &failover{p: startPipeline(t), sku: testenv.Unique(prefix), stock: stock}
	f.p.loadStock(f.sku, stock)
	f.slot = f.p.slot(f.sku)
	f.master, f.replica = priv.shard(t, f.slot)
	t.Cleanup(func() { priv.heal(t) })
	f.s = newSale(t, f.p.url, f.sku)
	f.stop = f.s.start(8, 20*time.Millisecond)
	t.Cleanup(f.stop)
	f.p.waitSold(f.sku, soldBefore, 60*time.Second)
	return f
}

// finish waits until MySQL sold out, lets the sale go on past the stock,
// stops it, reports the outage from t0, and waits until every order is
// settled.
func (f *failover) finish(t *testing.T, what string, t0, promoted time.Time) {
	t.Helper()
	f.p.waitSold(f.sku, f.stock, 90*time.Second)
	sellPastStock(f.s)
	f.stop()
	report(t, what, f.s, t0, promoted)
	f.p.drain(f.s)
	f.p.quiesce()
}

// sellPastStock lets the sale go on once MySQL sold out, until enough
// more orders were answered.
func sellPastStock(s *sale) {
	acc, out := s.counts()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		a, o := s.counts()
		if a+o >= acc+out+100 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(rep admin.ReconcileReport) string {
	var parts []string
	for _, s := range rep.SKUs {
		for _, r := range s.Repairs {
			parts = append(parts, fmt.Sprintf("%s: committed %d, released %d, sold %d->%d, avail %d->%d",
				s.Outcome, len(r.Committed), len(r.Released), r.Before.Sold, r.After.Sold, r.Before.Avail, r.After.Avail))
		}
		if len(s.Repairs) == 0 {
			parts = append(parts, string(s.Outcome))
		}
	}
	return strings.Join(parts, "; ")
}
