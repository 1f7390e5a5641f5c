package store

import "database/sql"

// RawSQL exposes the handle to the external tests, which check pragmas and
// what the tables really hold.
func (d *DB) RawSQL() *sql.DB { return d.sql }
