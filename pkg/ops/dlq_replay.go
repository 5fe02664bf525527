package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"surge/pkg/order"
	"surge/pkg/queue"
	"surge/pkg/store"
)

// Outcomes of a replay or discard, per dead letter. The audit log
// (dlq_replays) records replayed, already_invoiced, already_rejected and
// discarded.
const (
	// OutcomeReplayed: republished (confirmed) and removed from the dead
	// queue; the worker processes it again.
	OutcomeReplayed = "replayed"
	// OutcomeWouldReplay is OutcomeReplayed in a dry run.
	OutcomeWouldReplay = "would_replay"
	// OutcomeAlreadyInvoiced and OutcomeAlreadyRejected: MySQL already
	// holds the order's final outcome. The letter is not republished; it
	// is removed (in a dry run, it would be), since replaying it can change
	// nothing.
	OutcomeAlreadyInvoiced = "already_invoiced"
	OutcomeAlreadyRejected = "already_rejected"
	// OutcomeAlreadyReplayed: the letter left the queue by an earlier
	// replay and its order is not final yet; nothing was done.
	OutcomeAlreadyReplayed = "already_replayed"
	// OutcomeAlreadyDiscarded: the letter was discarded earlier; nothing
	// was done.
	OutcomeAlreadyDiscarded = "already_discarded"
	// OutcomeSkippedMalformed: selected by a filter, but its body is not
	// an order, so a replay could only park it again. It stays parked.
	OutcomeSkippedMalformed = "skipped_malformed"
	// OutcomeDiscarded: removed by a discard.
	OutcomeDiscarded = "discarded"
	// OutcomeFailed: the action failed; the letter is still parked.
	OutcomeFailed = "failed"
)

// ReplayRequest selects dead letters to replay: either IDs, or a filter
// (Reason and/or Since), or All. Giving none, or IDs together with a
// filter, or All together with a filter, is refused.
type ReplayRequest struct {
	IDs []string `json:"ids,omitempty"`
	// Reason selects letters parked with this reason.
	Reason string `json:"reason,omitempty"`
	// Since selects letters whose last failure is at or after it.
	Since  time.Time `json:"since,omitzero"`
	All    bool      `json:"all,omitempty"`
	DryRun bool      `json:"dry_run,omitempty"`
	// Actor is who asks, recorded in the audit log.
	Actor string `json:"actor"`
}

// Validate checks the selection, the ids and the actor.
func (r ReplayRequest) Validate() error {
	filter := r.Reason != "" || !r.Since.IsZero()
	switch {
	case len(r.IDs) == 0 && !filter && !r.All:
		return order.Invalid("say what to replay: dead letter ids, --reason, --since or --all")
	case len(r.IDs) > 0 && (filter || r.All):
		return order.Invalid("give either dead letter ids or a selection (--reason, --since, --all), not both")
	case r.All && filter:
		return order.Invalid("--all selects every dead letter: drop it to select by --reason or --since")
	}
	if err := validateIDs(r.IDs); err != nil {
		return err
	}
	return validateActor(r.Actor)
}

func (r ReplayRequest) matches(dl queue.DeadLetter) bool {
	if r.Reason != "" && dl.Reason != r.Reason {
		return false
	}
	return r.Since.IsZero() || !dl.LastFailure.Before(r.Since)
}

// Item is what happened to one dead letter.
type Item struct {
	ID      string `json:"id"`
	OrderID string `json:"order_id"`
	SKU     string `json:"sku,omitempty"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// Report is the answer to a replay or discard: one item per selected
// letter (parked ones in queue order, then named ones no longer parked)
// and how many ended with each outcome.
type Report struct {
	Action string         `json:"action"`
	DryRun bool           `json:"dry_run"`
	Actor  string         `json:"actor"`
	Items  []Item         `json:"results"`
	Counts map[string]int `json:"counts"`
}

func (r *Report) add(it Item) {
	r.Items = append(r.Items, it)
	r.Counts[it.Outcome]++
}

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
func (s *DeadLetters) Replay(ctx context.Context, req ReplayRequest) (Report, error) {
	rep := Report{Action: "replay", DryRun: req.DryRun, Actor: req.Actor, Counts: map[string]int{}}
	if err := req.Validate(); err != nil {
		return rep, err
	}
	plan, err := s.plan(ctx, req)
	if err != nil {
		return rep, err
	}
	if req.DryRun {
		for _, p := range plan.parked {
			rep.add(p.dryRun())
		}
		for _, it := range plan.gone {
			rep.add(it)
		}
		return rep, nil
	}
	err = s.execute(ctx, plan.parked, &rep)
	for _, it := range plan.gone {
		rep.add(it)
	}
	return rep, err
}

// planned is one parked letter and what a replay does with it.
type planned struct {
	letter  queue.DeadLetter
	outcome string // replayed, already_invoiced, already_rejected or skipped_malformed
	detail  string
}

func (p planned) item() Item {
	return Item{ID: p.letter.ID, OrderID: p.letter.OrderID, SKU: p.letter.SKU, Outcome: p.outcome, Detail: p.detail}
}

func (p planned) dryRun() Item {
	it := p.item()
	switch p.outcome {
	case OutcomeReplayed:
		it.Outcome = OutcomeWouldReplay
	case OutcomeAlreadyInvoiced, OutcomeAlreadyRejected:
		it.Detail += "; the dead letter would be removed"
	}
	return it
}

type replayPlan struct {
	parked []planned
	gone   []Item // named ids no longer parked
}

// plan reads the queue and MySQL, and decides; it changes nothing.
func (s *DeadLetters) plan(ctx context.Context, req ReplayRequest) (replayPlan, error) {
	dead, err := s.Queue.List(ctx)
	if err != nil {
		return replayPlan{}, err
	}
	var plan replayPlan
	selected, missing := selectLetters(dead, req.IDs, req.matches)
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
	p := planned{letter: dl, outcome: OutcomeReplayed}
	if _, err := orderOf(dl); err != nil {
		if named {
			return p, order.Invalid("dead letter %s cannot be replayed, its body is not an order (%v): discard it", dl.ID, err)
		}
		p.outcome, p.detail = OutcomeSkippedMalformed, "the body is not an order; discard it"
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

// finalOutcome describes an order MySQL already settled.
func finalOutcome(rec store.OrderRecord) (outcome, detail string) {
	if order.Status(rec.Status) == order.StatusRejected {
		return OutcomeAlreadyRejected, fmt.Sprintf("order rejected (%s)", rec.Reason)
	}
	return OutcomeAlreadyInvoiced, fmt.Sprintf("order invoiced (invoice %d)", rec.InvoiceID)
}

// execute replays and removes what plan decided, then records it.
func (s *DeadLetters) execute(ctx context.Context, plan []planned, rep *Report) error {
	var replay, remove []string
	for _, p := range plan {
		switch p.outcome {
		case OutcomeReplayed:
			replay = append(replay, p.letter.ID)
		case OutcomeAlreadyInvoiced, OutcomeAlreadyRejected:
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
		if err, ok := done[p.letter.ID]; p.outcome != OutcomeSkippedMalformed && (!ok || err != nil) {
			it.Outcome, it.Detail = OutcomeFailed, "still parked"
			if err != nil {
				it.Detail += ": " + err.Error()
			}
		} else if ok {
			if err := s.DB.RecordReplay(ctx, it.ID, it.OrderID, rep.Actor, it.Outcome); err != nil {
				errs = append(errs, fmt.Errorf("record %s of dead letter %s in the audit log: %w", it.Outcome, it.ID, unavailable(err)))
			}
			if it.Outcome != OutcomeReplayed {
				it.Detail += "; the dead letter was removed"
			}
		}
		rep.add(it)
	}
	return errors.Join(errs...)
}

// notParked reports named ids that are not in the queue from the audit
// log, or fails with order.ErrNotFound naming those it never saw.
func (s *DeadLetters) notParked(ctx context.Context, ids []string) ([]Item, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	log, err := s.DB.LastReplays(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up dead letters no longer parked: %w", unavailable(err))
	}
	var unknown []string
	var items []Item
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
func (s *DeadLetters) pastItem(ctx context.Context, r store.ReplayRecord) (Item, error) {
	it := Item{ID: r.DeadLetterID, OrderID: r.OrderID,
		Detail: fmt.Sprintf("%s by %s at %s", r.Outcome, r.Actor, r.At.UTC().Format(time.RFC3339))}
	it.Outcome = OutcomeAlreadyDiscarded
	if r.Outcome == OutcomeReplayed {
		it.Outcome = OutcomeAlreadyReplayed
	}
	if order.ValidateID(r.OrderID) != nil {
		return it, nil
	}
	rec, err := s.DB.Order(ctx, r.OrderID)
	switch {
	case errors.Is(err, order.ErrNotFound):
		if it.Outcome == OutcomeAlreadyReplayed {
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
