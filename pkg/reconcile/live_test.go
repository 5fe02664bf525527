package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/reconcile"
)

// TestReconcileRacingLiveTraffic runs the reconciler in a loop, with no
// grace at all (it releases every reservation MySQL has not seen yet),
// while buyers reserve, workers invoice and commit, and demand exceeds the
// stock. The loop stops while the last orders are still on their way, so
// no repair runs after the traffic. Nothing was lost, so Redis must end
// equal to MySQL: a repair that clobbered a live write, or counted a
// commit twice, would leave sold or avail off.
func TestReconcileRacingLiveTraffic(t *testing.T) {
	const total, buyers, perBuyer = 200, 16, 25 // demand 400
	e := newEnv(t)
	sku := e.product(total)
	// A slow snapshot widens the window in which live writes race the
	// repair.
	rec := reconcile.New(e.rdb, slowLedger{reconcile.StoreLedger{Store: e.db}},
		reconcile.Options{Grace: time.Nanosecond, Attempts: 1, Log: quiet()})

	ctx, stop := context.WithCancel(context.Background())
	var rounds, repaired, ordered atomic.Int64
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		for ctx.Err() == nil {
			rep := rec.SKU(ctx, sku, false)
			rounds.Add(1)
			if rep.Outcome == admin.SKUFailed && ctx.Err() == nil {
				t.Errorf("reconcile during traffic: %s", rep.Error)
				return
			}
			if len(rep.Repairs) > 0 {
				repaired.Add(1)
			}
		}
	}()

	var wg sync.WaitGroup
	for b := range buyers {
		wg.Go(func() {
			for i := range perBuyer {
				if err := buyAndWork(e, ord(sku, b*perBuyer+i, 1)); err != nil {
					t.Error(err)
					return
				}
				if ordered.Add(1) == total*3/4 { // well before MySQL sells out
					stop()
				}
			}
		})
	}
	wg.Wait()
	stop()
	<-recDone

	s := e.state(sku)
	if s.Avail+s.Reserved+s.Sold != s.Stock || s.Reserved != 0 {
		t.Errorf("redis after traffic: %+v, want consistent with nothing reserved", s)
	}
	if mysql := e.mysqlSold(sku); s.Sold != mysql || mysql != total {
		t.Errorf("redis sold %d, mysql sold %d, stock %d: want all equal", s.Sold, mysql, total)
	}
	t.Logf("%d reconcile rounds during traffic, %d changed something", rounds.Load(), repaired.Load())
}

// buyAndWork is one order through the gateway's reserve and the worker's
// MySQL transaction and Redis step.
func buyAndWork(e *env, o order.Order) error {
	ctx := context.Background()
	_, err := e.st.Reserve(ctx, o)
	if errors.Is(err, order.ErrSoldOut) {
		return nil
	}
	if err != nil {
		return err
	}
	res, err := e.db.Process(ctx, o, 0)
	if err != nil {
		return err
	}
	if res.Status == order.StatusInvoiced {
		_, err = e.st.Commit(ctx, o.SKU, o.ID, o.Qty)
	} else {
		_, err = e.st.Release(ctx, o.SKU, o.ID, order.ReleaseRejected)
	}
	return err
}

// slowLedger pauses after each MySQL snapshot, as a loaded database would.
type slowLedger struct{ reconcile.Ledger }

func (l slowLedger) Snapshot(ctx context.Context, sku string, ids []string, lookback time.Duration) (reconcile.Truth, error) {
	t, err := l.Ledger.Snapshot(ctx, sku, ids, lookback)
	time.Sleep(2 * time.Millisecond)
	return t, err
}
