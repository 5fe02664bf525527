package store

import (
	"context"
	"errors"
	"fmt"
)

// ErrSchemaBehind is what CheckSchema's error matches (errors.Is) when the
// database's schema is older than the newest migration this binary embeds.
var ErrSchemaBehind = errors.New("mysql schema is older than this build")

// SchemaError is CheckSchema's refusal: the version goose recorded in the
// database (goose_db_version) and the newest one this binary embeds.
type SchemaError struct {
	Current, Latest int64
}

func (e *SchemaError) Error() string {
	const fix = "run `opsctl migrate` (as the schema's owner, surge-ops) against this database, then start again"
	if e.Current == 0 {
		return fmt.Sprintf("mysql schema is at version 0 (never migrated), this build needs version %d: %s; "+
			"if it was migrated, SURGE_MYSQL_DSN's user cannot read goose_db_version: grant it SELECT "+
			"(deploy/mysql-grants.sql, deploy/users.sh apply mysql)", e.Latest, fix)
	}
	return fmt.Sprintf("mysql schema is at version %d, this build needs version %d: %s", e.Current, e.Latest, fix)
}

// Is makes errors.Is(err, ErrSchemaBehind) hold.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaBehind }

// CheckSchema refuses a database whose schema is older than the newest
// migration this binary embeds (sql/): a service started on it would fail
// on its first query of a missing table or column, mid-sale. It compares
// goose's version table (goose_db_version, which needs only SELECT) with
// the embedded migrations and changes nothing; its error is a *SchemaError
// naming both versions and the fix. A newer schema is accepted: migrations
// are additive, so a binary of the previous release runs beside the schema
// of the next one during a rollout.
func CheckSchema(ctx context.Context, db *Store) error {
	cur, latest, err := db.MigrationVersion(ctx)
	if err != nil {
		return fmt.Errorf("check the mysql schema version: %w", err)
	}
	if cur < latest {
		return &SchemaError{Current: cur, Latest: latest}
	}
	return nil
}
