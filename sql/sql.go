// Package sql embeds surge's MySQL migrations (goose format, one file per
// version) so every binary carries the schema it expects. It lives beside
// the .sql files because go:embed cannot reach a parent directory; import it
// under another name (for example migrations) next to database/sql.
package sql

import "embed"

// FS holds the migration files at its root, ready for goose.NewProvider.
//
//go:embed *.sql
var FS embed.FS
