// Package reconcile heals a SKU's stock in Redis after a failover lost
// acknowledged writes. MySQL is the truth. For each SKU, under a lock so
// runs never overlap, it reads the SKU's keys in Redis, then MySQL in one
// consistent snapshot, plans the repairs (commit what MySQL invoiced,
// release what MySQL rejected, align stock and sold, recompute avail) and
// applies them with one Lua script on the SKU's slot. Every change in that
// script is conditional on what was read, so live gateway and worker
// traffic is never clobbered, and no repair ever touches MySQL: it cannot
// make MySQL oversell.
//
// A reservation is never released because its order is late: an order
// past the grace period with nothing in MySQL is published again instead
// (see makePlan), so an accepted order waiting in a backlog, a retry tier
// or the dead letters keeps its units, and an order whose publish nobody
// confirmed settles.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"surge/pkg/admin"
)

// Options tunes a Reconciler. The zero value of each field means its
// default.
type Options struct {
	// Grace is how long a reservation may wait for its MySQL order before
	// the order is published again. Publishing too early only makes a
	// duplicate the worker ignores. Default 5m.
	Grace time.Duration
	// Publisher publishes those orders. Nil: none is published (they are
	// reported as unpublished) and they keep their units.
	Publisher Publisher
	// Lookback is how far back orders MySQL invoiced are checked for a
	// commit Redis lost. It must cover the worker's retry tiers. Default
	// 15m.
	Lookback time.Duration
	// StateTTL is how long per-order states live, as in stock.Options.
	// Default 24h.
	StateTTL time.Duration
	// Attempts bounds the rounds on one SKU while live commits keep moving
	// sold between the read and the repair. Default 3.
	Attempts int
	// Backoff is the pause after the first such round; it doubles after
	// each. Default 100ms.
	Backoff time.Duration
	// Locker serialises runs on one SKU across processes. Default: a
	// Redis lock on the same client (NewRedisLocker with its defaults).
	Locker Locker
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// Log receives one line per SKU that was repaired, busy or failed.
	// Default slog.Default().
	Log *slog.Logger
}

func (o *Options) setDefaults(rdb Redis) {
	if o.Grace <= 0 {
		o.Grace = 5 * time.Minute
	}
	if o.Lookback <= 0 {
		o.Lookback = 15 * time.Minute
	}
	if o.StateTTL <= 0 {
		o.StateTTL = 24 * time.Hour
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.Locker == nil {
		o.Locker = NewRedisLocker(rdb, LockOptions{})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Reconciler compares Redis with MySQL per SKU and repairs Redis. It is
// safe for concurrent use.
type Reconciler struct {
	rdb    Redis
	ledger Ledger
	opts   Options
	ttl    string
}

// New returns a Reconciler on rdb and ledger.
func New(rdb Redis, ledger Ledger, opts Options) *Reconciler {
	opts.setDefaults(rdb)
	return &Reconciler{rdb: rdb, ledger: ledger, opts: opts,
		ttl: strconv.FormatInt(int64(opts.StateTTL/time.Second), 10)}
}

// Run reconciles the given SKUs, or every product's when none is given,
// one at a time, and reports on each. It stops early when ctx ends.
func (r *Reconciler) Run(ctx context.Context, dryRun bool, skus ...string) admin.ReconcileReport {
	rep := admin.ReconcileReport{StartedAt: r.opts.Now().UTC(), DryRun: dryRun, Summary: map[admin.SKUOutcome]int{}}
	if len(skus) == 0 {
		var err error
		if skus, err = r.ledger.SKUs(ctx); err != nil {
			Fail(&rep, "list skus", err)
		}
	}
	for _, sku := range skus {
		if err := ctx.Err(); err != nil {
			Fail(&rep, "run", fmt.Errorf("stopped before sku=%s: %w", sku, err))
			break
		}
		add(&rep, r.SKU(ctx, sku, dryRun))
	}
	rep.FinishedAt = r.opts.Now().UTC()
	return rep
}

// SKU reconciles one SKU under its lock. A round that changed something
// (or would, when dryRun) is recorded in MySQL. Rounds repeat, up to
// Options.Attempts, while live commits keep sold from being verified.
func (r *Reconciler) SKU(ctx context.Context, sku string, dryRun bool) admin.SKUReport {
	rep := admin.SKUReport{SKU: sku, DryRun: dryRun}
	release, err := r.opts.Locker.Lock(ctx, sku)
	if err != nil {
		return r.failed(rep, err)
	}
	defer release()
	backoff := r.opts.Backoff
	for {
		rep.Attempts++
		ch, found, err := r.round(ctx, sku, dryRun)
		if err != nil {
			return r.failed(rep, err)
		}
		rep.Found, rep.After = &found, &ch.After
		if changedAnything(ch) {
			rep.Repairs = append(rep.Repairs, ch)
			if err := r.ledger.RecordRepair(ctx, sku, found, ch, dryRun); err != nil {
				return r.failed(rep, err)
			}
		}
		if ch.Aligned || rep.Attempts >= r.opts.Attempts {
			return r.done(rep, ch.Aligned)
		}
		select {
		case <-ctx.Done():
			return r.failed(rep, fmt.Errorf("reconcile sku=%s: %w", sku, ctx.Err()))
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// round reads Redis, then MySQL (that order matters: the script verifies
// that sold did not move since the Redis read, so every commit MySQL's
// snapshot does not count is still to come), plans and applies.
func (r *Reconciler) round(ctx context.Context, sku string, dryRun bool) (admin.Changes, admin.Found, error) {
	v, err := readView(ctx, r.rdb, sku)
	if err != nil {
		return admin.Changes{}, admin.Found{}, err
	}
	t, err := r.ledger.Snapshot(ctx, sku, sortedKeys(v.resv), r.opts.Lookback)
	if err != nil {
		return admin.Changes{}, admin.Found{}, err
	}
	var ids []string
	for _, o := range t.Invoiced {
		if _, held := v.resv[o.ID]; !held {
			ids = append(ids, o.ID)
		}
	}
	done, err := committedStates(ctx, r.rdb, sku, ids)
	if err != nil {
		return admin.Changes{}, admin.Found{}, err
	}
	p := makePlan(v, t, done, r.opts.Grace)
	found := admin.Found{MySQLStock: t.Stock, MySQLSold: t.Sold, Redis: v.counters,
		Reservations: len(v.resv), Orders: p.why, Compensated: t.Compensated}
	ch, err := apply(ctx, r.rdb, sku, v, t, p, r.ttl, dryRun)
	if err != nil {
		return ch, found, err
	}
	if err = r.republish(ctx, sku, p.adopts, &ch, dryRun); err != nil {
		return ch, found, err
	}
	// What the repair left as sold (in a dry run, what was read): a commit
	// after it moves sold, and the counts wait for the next round. The
	// limit does not: it is set back to MySQL's in every round, or a busy
	// sale, moving sold in each, would keep the wrong one.
	sold := v.soldRaw
	if !dryRun {
		sold = strconv.Itoa(ch.After.Sold)
	}
	var countsAligned bool
	ch.MaxPerCustomer, ch.CustomerCounts, countsAligned, err = repairCounts(ctx, r.rdb, sku, v, t, sold, ch.Aligned, dryRun)
	ch.Aligned = ch.Aligned && countsAligned
	return ch, found, err
}

func (r *Reconciler) done(rep admin.SKUReport, aligned bool) admin.SKUReport {
	switch {
	case !aligned:
		rep.Outcome = admin.SKUBusy
		rep.Error = fmt.Sprintf("live commits or a stock load moved the SKU during each of %d rounds; run again", rep.Attempts)
	case len(rep.Repairs) > 0:
		rep.Outcome = admin.SKURepaired
	default:
		rep.Outcome = admin.SKUConsistent
		return rep
	}
	r.opts.Log.Info("reconciled sku", "sku", rep.SKU, "outcome", rep.Outcome, "dry_run", rep.DryRun,
		"rounds", rep.Attempts, "repairs", len(rep.Repairs))
	return rep
}

func (r *Reconciler) failed(rep admin.SKUReport, err error) admin.SKUReport {
	rep.Outcome = admin.SKUFailed
	if errors.Is(err, ErrBusy) {
		rep.Outcome = admin.SKUBusy
	}
	rep.Error = err.Error()
	r.opts.Log.Warn("reconcile sku", "sku", rep.SKU, "outcome", rep.Outcome, "err", err)
	return rep
}
