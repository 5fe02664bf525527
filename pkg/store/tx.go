package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// inTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise. fn's error is returned unchanged so callers can test it.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}
