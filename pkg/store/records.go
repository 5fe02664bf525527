package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// RecordRepair logs what the reconciler found for a SKU and what it changed
// (or would have changed, in a dry run). found and changed are stored as
// JSON.
func (s *Store) RecordRepair(ctx context.Context, sku string, found, changed any, dryRun bool) error {
	f, err := json.Marshal(found)
	if err != nil {
		return fmt.Errorf("encode repair findings sku=%s: %w", sku, err)
	}
	c, err := json.Marshal(changed)
	if err != nil {
		return fmt.Errorf("encode repair changes sku=%s: %w", sku, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO reconcile_repairs (sku, found, changed, dry_run)
		VALUES (?, ?, ?, ?)`, sku, string(f), string(c), dryRun)
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
