package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ReplayRecord is one line of the dead-letter audit log (dlq_replays).
type ReplayRecord struct {
	DeadLetterID string    `db:"dead_letter_id" json:"dead_letter_id"`
	OrderID      string    `db:"order_id" json:"order_id"`
	Actor        string    `db:"actor" json:"actor"`
	Outcome      string    `db:"outcome" json:"outcome"`
	At           time.Time `db:"at" json:"at"`
}

// LastReplays returns, for each of ids that appears in the audit log, its
// latest record: how a dead letter that is no longer parked left the
// queue, and who did it.
func (s *Store) LastReplays(ctx context.Context, ids []string) (map[string]ReplayRecord, error) {
	out := make(map[string]ReplayRecord)
	if len(ids) == 0 {
		return out, nil
	}
	query, args, err := sqlx.In(`SELECT dead_letter_id, order_id, actor, outcome, at FROM dlq_replays
		WHERE dead_letter_id IN (?) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("build replay lookup: %w", err)
	}
	var recs []ReplayRecord
	if err := s.db.SelectContext(ctx, &recs, query, args...); err != nil {
		return nil, fmt.Errorf("read replays of %d dead letters: %w", len(ids), err)
	}
	for _, r := range recs {
		out[r.DeadLetterID] = r // ordered by id: the last one wins
	}
	return out, nil
}
