package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"surge/internal/testenv"
)

// TestCheckSchema: on a fresh database migrated to one version less than
// the newest embedded migration, CheckSchema refuses with both versions and
// the fix, and changes nothing; once migrated, it accepts. A database never
// migrated is refused as version 0, with the grant that could hide the
// version table named.
func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testenv.MySQLDSN(t))
	latest := migrationFiles(t)

	err := CheckSchema(ctx, s)
	var se *SchemaError
	if !errors.As(err, &se) || se.Current != 0 || se.Latest != latest || !errors.Is(err, ErrSchemaBehind) ||
		!strings.Contains(err.Error(), "goose_db_version") {
		t.Fatalf("never migrated: %v; want a SchemaError 0 < %d naming goose_db_version", err, latest)
	}

	p, err := s.provider()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, latest-1); err != nil {
		t.Fatal(err)
	}
	rows := count(t, s, "SELECT COUNT(*) FROM goose_db_version")
	err = CheckSchema(ctx, s)
	if !errors.As(err, &se) || se.Current != latest-1 || se.Latest != latest {
		t.Fatalf("one version behind: %v; want a SchemaError %d < %d", err, latest-1, latest)
	}
	for _, w := range []string{fmt.Sprintf("version %d", latest-1), fmt.Sprintf("version %d", latest), "opsctl migrate"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\nwant it to say %q", err, w)
		}
	}
	if got := count(t, s, "SELECT COUNT(*) FROM goose_db_version"); got != rows {
		t.Fatalf("CheckSchema changed goose_db_version: %d -> %d rows", rows, got)
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := CheckSchema(ctx, s); err != nil {
		t.Fatalf("migrated: %v", err)
	}
}
