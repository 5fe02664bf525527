package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// RecordRepair logs what the reconciler found for a SKU and what it changed
// (or would have changed, in a dry run), on its schedule. found and
// changed are stored as JSON.
func (s *Store) RecordRepair(ctx context.Context, sku string, found, changed any, dryRun bool) error {
	return s.RecordRepairBy(ctx, sku, found, changed, dryRun, "")
}

// RecordRepairBy is RecordRepair for a run an operator asked for: actor
// names them ("" is the schedule).
func (s *Store) RecordRepairBy(ctx context.Context, sku string, found, changed any, dryRun bool, actor string) error {
	f, err := json.Marshal(found)
	if err != nil {
		return fmt.Errorf("encode repair findings sku=%s: %w", sku, err)
	}
	c, err := json.Marshal(changed)
	if err != nil {
		return fmt.Errorf("encode repair changes sku=%s: %w", sku, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO reconcile_repairs (sku, found, changed, dry_run, actor)
		VALUES (?, ?, ?, ?, ?)`, sku, string(f), string(c), dryRun, actor)
	if err != nil {
		return fmt.Errorf("record repair sku=%s: %w", sku, err)
	}
	return nil
}

// RecordReplay logs that actor replayed a dead letter, for which order, and
// the outcome.
func (s *Store) RecordReplay(ctx context.Context, deadLetterID, orderID, actor, outcome string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO dlq_replays (dead_letter_id, order_id, actor, outcome)
		VALUES (?, ?, ?, ?)`, deadLetterID, orderID, actor, outcome)
	if err != nil {
		return fmt.Errorf("record replay of dead letter %s: %w", deadLetterID, err)
	}
	return nil
}
