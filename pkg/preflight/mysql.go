package preflight

import (
	"context"
	"fmt"
	"time"

	"surge/pkg/store"
)

// SchemaFacts is MySQL's migration state.
type SchemaFacts struct {
	// Err is set when MySQL could not be reached or read.
	Err             error
	Current, Latest int64
}

// GatherSchema reads the applied and newest migration versions.
func GatherSchema(ctx context.Context, dsn string) SchemaFacts {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn, store.Options{MaxOpenConns: 1})
	if err != nil {
		return SchemaFacts{Err: err}
	}
	defer db.Close()
	cur, latest, err := db.MigrationVersion(ctx)
	return SchemaFacts{Err: err, Current: cur, Latest: latest}
}

// CheckSchema wants the schema at the newest migration this binary knows.
func CheckSchema(f SchemaFacts) Result {
	switch {
	case f.Err != nil:
		return failf(ItemSchema, "start MariaDB or fix SURGE_MYSQL_DSN", "MySQL unreachable: %v", f.Err)
	case f.Current < f.Latest:
		return failf(ItemSchema, "opsctl migrate", "schema at version %d, latest is %d", f.Current, f.Latest)
	case f.Current > f.Latest:
		return Result{Item: ItemSchema, Status: Warn, Fix: "deploy binaries built from the newer code",
			Detail: fmt.Sprintf("schema at version %d, newer than this binary's %d", f.Current, f.Latest)}
	}
	return Result{Item: ItemSchema, Status: Pass, Detail: fmt.Sprintf("MySQL reachable, schema at the latest version %d", f.Latest)}
}
