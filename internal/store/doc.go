// Package store is the portal's only SQL: database/sql on modernc.org/sqlite
// (WAL, foreign keys, busy timeout), the embedded migrations, and one file per
// table. Functions take ctx first, wrap errors with a "store: <op>:" prefix and
// return ErrNotFound rather than (nil, nil).
//
// It may import internal/workflow for domain types; it must never import
// internal/web, internal/views, internal/provision or any HTTP, Kubernetes or
// AWS package.
package store
