package ops

import (
	"context"
	"errors"
	"fmt"

	"surge/pkg/admin"
	"surge/pkg/order"
	"surge/pkg/queue"
)

// KeptCopies is where discarded dead letters are kept so that a discard
// can be undone. QueueDead implements it with the discarded queue.
type KeptCopies interface {
	// ListDiscarded returns the kept copies, oldest discard first.
	ListDiscarded(ctx context.Context) ([]queue.DeadLetter, error)
	// RestoreDiscarded parks the copies with these ids again; an id not
	// kept fails the call, changing nothing.
	RestoreDiscarded(ctx context.Context, ids []string) ([]string, error)
}

var _ KeptCopies = QueueDead{}

// ListDiscarded implements KeptCopies.
func (q QueueDead) ListDiscarded(ctx context.Context) ([]queue.DeadLetter, error) {
	return queue.ListDiscarded(ctx, q.Conn, q.Topology)
}

// RestoreDiscarded implements KeptCopies.
func (q QueueDead) RestoreDiscarded(ctx context.Context, ids []string) ([]string, error) {
	return queue.RestoreDiscarded(ctx, q.Conn, q.Topology, ids)
}

// Discarded returns the discarded letters still kept (queue.DiscardedTTL),
// with their headers and bodies, oldest discard first.
func (s *DeadLetters) Discarded(ctx context.Context) ([]admin.LetterDetail, error) {
	kc, err := s.kept()
	if err != nil {
		return nil, err
	}
	dead, err := kc.ListDiscarded(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.LetterDetail, len(dead))
	for i, dl := range dead {
		out[i] = detailOf(dl)
	}
	return out, nil
}

// Restore parks the named discarded letters in the dead queue again, as
// they were, and records each restore with actor in the audit log.
func (s *DeadLetters) Restore(ctx context.Context, ids []string, actor string) (admin.LetterReport, error) {
	rep := admin.LetterReport{Action: "restore", Actor: actor, Counts: map[string]int{}}
	if len(ids) == 0 {
		return rep, order.Invalid("name the discarded letters to restore")
	}
	if err := admin.ValidateLetterIDs(ids); err != nil {
		return rep, err
	}
	if err := admin.ValidateActor(actor); err != nil {
		return rep, err
	}
	kc, err := s.kept()
	if err != nil {
		return rep, err
	}
	kept, err := kc.ListDiscarded(ctx)
	if err != nil {
		return rep, err
	}
	selected, missing := selectLetters(kept, ids, nil)
	if len(missing) > 0 {
		return rep, fmt.Errorf("discarded letters %v are not kept: %w", missing, order.ErrNotFound)
	}
	restored, err := kc.RestoreDiscarded(ctx, ids)
	done := map[string]bool{}
	for _, id := range restored {
		done[id] = true
	}
	var errs []error
	if err != nil {
		errs = append(errs, changed(err))
	}
	for _, dl := range selected {
		it := admin.LetterItem{ID: dl.ID, OrderID: dl.OrderID, SKU: dl.SKU, Outcome: admin.OutcomeRestored, Detail: "parked again"}
		if !done[dl.ID] {
			it.Outcome, it.Detail = admin.OutcomeFailed, "still discarded"
		} else if err := s.DB.RecordReplay(ctx, dl.ID, dl.OrderID, actor, admin.OutcomeRestored); err != nil {
			errs = append(errs, fmt.Errorf("record restore of %s in the audit log: %w", dl.ID, unavailable(err)))
		}
		rep.Add(it)
	}
	return rep, errors.Join(errs...)
}

func (s *DeadLetters) kept() (KeptCopies, error) {
	kc, ok := s.Queue.(KeptCopies)
	if !ok {
		return nil, fmt.Errorf("this dead-letter queue keeps no discarded copies: %w", order.ErrUnavailable)
	}
	return kc, nil
}
