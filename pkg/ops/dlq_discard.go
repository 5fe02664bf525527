package ops

import (
	"context"
	"errors"
	"fmt"

	"surge/pkg/admin"
	"surge/pkg/order"
)

// Discard removes the named dead letters for good and records who did it.
// Each item's detail says where its order stands in MySQL, so discarding
// an order that was never processed is visible in the report. Discarding
// does not cancel an accepted order: while its reservation is held, the
// reconciler publishes it again (an accepted order is invoiced). Ids no longer parked are
// reported from the audit log; ids it never saw fail the call with
// order.ErrNotFound before anything changes. MySQL is read before the
// queue is touched, so an audit record cannot be refused by a MySQL that
// was already down.
func (s *DeadLetters) Discard(ctx context.Context, ids []string, actor string) (admin.LetterReport, error) {
	rep := admin.LetterReport{Action: "discard", Actor: actor, Counts: map[string]int{}}
	if len(ids) == 0 {
		return rep, order.Invalid("name the dead letters to discard (dlq list shows their ids)")
	}
	if err := admin.ValidateLetterIDs(ids); err != nil {
		return rep, err
	}
	if err := admin.ValidateActor(actor); err != nil {
		return rep, err
	}
	dead, err := s.Queue.List(ctx)
	if err != nil {
		return rep, err
	}
	selected, missing := selectLetters(dead, ids, nil)
	gone, err := s.notParked(ctx, missing)
	if err != nil {
		return rep, err
	}
	items := make([]admin.LetterItem, len(selected))
	parked := make([]string, len(selected))
	for i, dl := range selected {
		items[i] = admin.LetterItem{ID: dl.ID, OrderID: dl.OrderID, SKU: dl.SKU, Outcome: admin.OutcomeDiscarded}
		if items[i].Detail, err = s.orderState(ctx, dl.OrderID); err != nil {
			return rep, err
		}
		parked[i] = dl.ID
	}
	var errs []error
	removed := map[string]bool{}
	if len(parked) > 0 {
		ids, err := s.Queue.Discard(ctx, parked)
		for _, id := range ids {
			removed[id] = true
		}
		if err != nil {
			errs = append(errs, changed(err))
		}
	}
	for _, it := range items {
		if !removed[it.ID] {
			it.Outcome, it.Detail = admin.OutcomeFailed, "still parked"
		} else if err := s.DB.RecordReplay(ctx, it.ID, it.OrderID, actor, admin.OutcomeDiscarded); err != nil {
			errs = append(errs, fmt.Errorf("record discard of dead letter %s in the audit log: %w", it.ID, unavailable(err)))
		}
		rep.Add(it)
	}
	for _, it := range gone {
		rep.Add(it)
	}
	return rep, errors.Join(errs...)
}

// orderState says where an order stands in MySQL, for a discard report.
func (s *DeadLetters) orderState(ctx context.Context, id string) (string, error) {
	if order.ValidateID(id) != nil {
		return "the body is not an order", nil
	}
	rec, err := s.DB.Order(ctx, id)
	switch {
	case errors.Is(err, order.ErrNotFound):
		return "the order was never processed: if it still holds a reservation (it was accepted), the " +
			"reconciler publishes it again after its grace period; otherwise it will not be invoiced", nil
	case err != nil:
		return "", fmt.Errorf("check order %s in MySQL before discarding: %w", id, unavailable(err))
	}
	_, detail := finalOutcome(rec)
	return detail, nil
}
