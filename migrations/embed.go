// Package migrations holds the portal's numbered SQL migrations, embedded into
// the binary and applied at start-up by internal/store. Files are append-only:
// never edit one that has shipped; add the next number instead. Each file runs
// in its own transaction. This package must not import anything.
package migrations

import "embed"

// FS holds every *.sql migration, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
