package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/store"
)

// Replay republishes the selected dead letters so the worker processes
// them again. Before anything changes it checks each order in MySQL: one
// already invoiced or rejected is not republished (the report says so and
// the letter is removed), so repeating a replay never invoices twice. A
// letter whose body is not an order is refused when named and skipped
// when selected by a filter. Named ids that are no longer parked are
// reported from the audit log; ids it never saw fail the call with
// order.ErrNotFound before anything changes. Each action is recorded with
// req.Actor. On a broker failure midway the report holds what was done
// and the error wraps order.ErrUnavailable.
func (s *DeadLetters) Replay(ctx context.Context, req admin.ReplayRequest) (admin.LetterReport, error) {
	rep := admin.LetterReport{Action: "replay", DryRun: req.DryRun, Actor: req.Actor, Counts: map[string]int{}}
	if err := req.Validate(); err != nil {
		return rep, err
	}
	plan, err := s.plan(ctx, req)
	if err != nil {
		return rep, err
	}
	if req.DryRun {
		for _, p := range plan.parked {
			rep.Add(p.dryRun())
		}
		for _, it := range plan.gone {
			rep.Add(it)
		}
		return rep, nil
	}
	err = s.execute(ctx, plan.parked, &rep)
	for _, it := range plan.gone {
		rep.Add(it)
	}
	return rep, err
}

// planned is one parked letter and what a replay does with it.
type planned struct {
	letter  queue.DeadLetter
	outcome string // replayed, already_invoiced, already_rejected or skipped_malformed
	detail  string
}

func (p planned) item() admin.LetterItem {
	return admin.LetterItem{ID: p.letter.ID, OrderID: p.letter.OrderID, SKU: p.letter.SKU, Outcome: p.outcome, Detail: p.detail}
}

func (p planned) dryRun() admin.LetterItem {
	it := p.item()
	switch p.outcome {
	case admin.OutcomeReplayed:
		it.Outcome = admin.OutcomeWouldReplay
	case admin.OutcomeAlreadyInvoiced, admin.OutcomeAlreadyRejected:
		it.Detail += "; the dead letter would be removed"
	}
	return it
}

type replayPlan struct {
	parked []planned
	gone   []admin.LetterItem // named ids no longer parked
}

// plan reads the queue and MySQL, and decides; it changes nothing.
func (s *DeadLetters) plan(ctx context.Context, req admin.ReplayRequest) (replayPlan, error) {
	dead, err := s.Queue.List(ctx)
	if err != nil {
		return replayPlan{}, err
	}
	var plan replayPlan
	selected, missing := selectLetters(dead, req.IDs, func(dl queue.DeadLetter) bool { return req.Matches(letterOf(dl)) })
	for _, dl := range selected {
		p, err := s.planOne(ctx, dl, len(req.IDs) > 0)
		if err != nil {
			return replayPlan{}, err
		}
		plan.parked = append(plan.parked, p)
	}
	plan.gone, err = s.notParked(ctx, missing)
	return plan, err
}

func (s *DeadLetters) planOne(ctx context.Context, dl queue.DeadLetter, named bool) (planned, error) {
	p := planned{letter: dl, outcome: admin.OutcomeReplayed}
	if len(dl.OrderIDs) > 0 {
		return s.planBatch(ctx, p)
	}
	if _, err := orderOf(dl); err != nil {
		if named {
			return p, order.Invalid("dead letter %s cannot be replayed, its body is not an order (%v): discard it", dl.ID, err)
		}
		p.outcome, p.detail = admin.OutcomeSkippedMalformed, "the body is not an order; discard it"
		return p, nil
	}
	rec, err := s.DB.Order(ctx, dl.OrderID)
	switch {
	case errors.Is(err, order.ErrNotFound):
		return p, nil
	case err != nil:
		return p, fmt.Errorf("check order %s in MySQL before replaying: %w", dl.OrderID, unavailable(err))
	}
	p.outcome, p.detail = finalOutcome(rec)
	p.detail += ", not republished"
	return p, nil
}

// planBatch decides for a batched letter (several orders the broker
// parked in one message): replayed, one message per order, unless MySQL
// already settled every one of them, in which case the letter is only
// removed. A replay of a partly settled batch republishes the settled
// orders too; the worker finds them in MySQL and only acks them.
func (s *DeadLetters) planBatch(ctx context.Context, p planned) (planned, error) {
	invoiced, rejected := 0, 0
	for _, id := range p.letter.OrderIDs {
		rec, err := s.DB.Order(ctx, id)
		switch {
		case errors.Is(err, order.ErrNotFound):
			p.detail = fmt.Sprintf("%d orders, republished one by one", len(p.letter.OrderIDs))
			return p, nil
		case err != nil:
			return p, fmt.Errorf("check order %s in MySQL before replaying: %w", id, unavailable(err))
		case order.Status(rec.Status) == order.StatusRejected:
			rejected++
		default:
			invoiced++
		}
	}
	p.outcome = admin.OutcomeAlreadyInvoiced
	if invoiced == 0 {
		p.outcome = admin.OutcomeAlreadyRejected
	}
	p.detail = fmt.Sprintf("all %d orders settled (%d invoiced, %d rejected), not republished", len(p.letter.OrderIDs), invoiced, rejected)
	return p, nil
}

// finalOutcome describes an order MySQL already settled.
func finalOutcome(rec store.OrderRecord) (outcome, detail string) {
	if order.Status(rec.Status) == order.StatusRejected {
		return admin.OutcomeAlreadyRejected, fmt.Sprintf("order rejected (%s)", rec.Reason)
	}
	return admin.OutcomeAlreadyInvoiced, fmt.Sprintf("order invoiced (invoice %d)", rec.InvoiceID)
}

// execute replays and removes what plan decided, then records it.
func (s *DeadLetters) execute(ctx context.Context, plan []planned, rep *admin.LetterReport) error {
	var replay, remove []string
	for _, p := range plan {
		switch p.outcome {
		case admin.OutcomeReplayed:
			replay = append(replay, p.letter.ID)
		case admin.OutcomeAlreadyInvoiced, admin.OutcomeAlreadyRejected:
			remove = append(remove, p.letter.ID)
		}
	}
	done := map[string]error{}
	var errs []error
	if len(replay) > 0 {
		results, err := s.Queue.Replay(ctx, replay)
		for _, r := range results {
			done[r.ID] = r.Err
		}
		if err != nil {
			errs = append(errs, changed(err))
		}
	}
	if len(remove) > 0 && len(errs) == 0 {
		removed, err := s.Queue.Discard(ctx, remove)
		for _, id := range removed {
			done[id] = nil
		}
		if err != nil {
			errs = append(errs, changed(err))
		}
	}
	for _, p := range plan {
		it := p.item()
		if err, ok := done[p.letter.ID]; p.outcome != admin.OutcomeSkippedMalformed && (!ok || err != nil) {
			it.Outcome, it.Detail = admin.OutcomeFailed, "still parked"
			if err != nil {
				it.Detail += ": " + err.Error()
			}
		} else if ok {
			if err := s.DB.RecordReplay(ctx, it.ID, it.OrderID, rep.Actor, it.Outcome); err != nil {
				errs = append(errs, fmt.Errorf("record %s of dead letter %s in the audit log: %w", it.Outcome, it.ID, unavailable(err)))
			}
			if it.Outcome != admin.OutcomeReplayed {
				it.Detail += "; the dead letter was removed"
			}
		}
		rep.Add(it)
	}
	return errors.Join(errs...)
}

// notParked reports named ids that are not in the queue from the audit
// log, or fails with order.ErrNotFound naming those it never saw.
func (s *DeadLetters) notParked(ctx context.Context, ids []string) ([]admin.LetterItem, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	log, err := s.DB.LastReplays(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up dead letters no longer parked: %w", unavailable(err))
	}
	var unknown []string
	var items []admin.LetterItem
	for _, id := range ids {
		r, ok := log[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		it, err := s.pastItem(ctx, r)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("dead letters %s: %w: not parked and never replayed or discarded (dlq list shows the parked ids)",
			strings.Join(unknown, ", "), order.ErrNotFound)
	}
	return items, nil
}

// pastItem reports a letter that already left the queue.
func (s *DeadLetters) pastItem(ctx context.Context, r store.ReplayRecord) (admin.LetterItem, error) {
	it := admin.LetterItem{ID: r.DeadLetterID, OrderID: r.OrderID,
		Detail: fmt.Sprintf("%s by %s at %s", r.Outcome, r.Actor, r.At.UTC().Format(time.RFC3339))}
	it.Outcome = admin.OutcomeAlreadyDiscarded
	if r.Outcome == admin.OutcomeReplayed {
		it.Outcome = admin.OutcomeAlreadyReplayed
	}
	if order.ValidateID(r.OrderID) != nil {
		return it, nil
	}
	rec, err := s.DB.Order(ctx, r.OrderID)
	switch {
	case errors.Is(err, order.ErrNotFound):
		if it.Outcome == admin.OutcomeAlreadyReplayed {
			it.Detail += "; the order is not processed yet"
		}
	case err != nil:
		return it, fmt.Errorf("check order %s in MySQL: %w", r.OrderID, unavailable(err))
	default:
		outcome, detail := finalOutcome(rec)
		it.Outcome, it.Detail = outcome, detail+"; dead letter "+it.Detail
	}
	return it, nil
}

// selectLetters picks the parked letters named by ids (or, without ids,
// accepted by match), in queue order, and lists the named ids not parked.
func selectLetters(dead []queue.DeadLetter, ids []string, match func(queue.DeadLetter) bool) (selected []queue.DeadLetter, missing []string) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = false
	}
	for _, dl := range dead {
		if _, named := want[dl.ID]; named {
			want[dl.ID] = true
			selected = append(selected, dl)
		} else if len(ids) == 0 && match(dl) {
			selected = append(selected, dl)
		}
	}
	for _, id := range ids {
		if !want[id] {
			want[id] = true // report a repeated id once
			missing = append(missing, id)
		}
	}
	return selected, missing
}

// orderOf decodes a letter's body the way the worker does.
func orderOf(dl queue.DeadLetter) (order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(dl.Body, &o); err != nil {
		return o, order.Invalid("not JSON")
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, order.ValidateID(o.ID)
}

// unavailable marks a MySQL failure as retryable for exit codes and HTTP
// statuses, unless it already carries a domain error.
func unavailable(err error) error {
	for _, e := range []error{order.ErrUnavailable, order.ErrNotFound, order.ErrInvalid, order.ErrConflict} {
		if errors.Is(err, e) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
}

// changedError is a dead-letter operation that found the queue different
// from the listing it was planned on (another operator acted meanwhile).
// It is a conflict, not a "not found" on the caller's ids.
type changedError struct{ cause error }

func (e changedError) Error() string {
	return "the dead queue changed since it was read (another operation ran); read it and try again: " + e.cause.Error()
}

func (e changedError) Unwrap() error { return order.ErrConflict }

func changed(err error) error {
	if errors.Is(err, order.ErrNotFound) {
		return changedError{err}
	}
	return err
}
