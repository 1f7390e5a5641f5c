package store

import "database/sql"

// RawSQL exposes the handle to the external tests, which check pragmas and
// what the tables really hold.
func (d *DB) RawSQL() *sql.DB { return d.sql }

// ConnCols is the column list ListConnections selects, so that the query
// plan test explains the same query shapes.
const ConnCols = connCols

// ChainHash lets the tamper tests forge a row the way an attacker who knows
// the scheme would.
func ChainHash(prev string, e AuditEvent) string { return chainHash(prev, e) }

// GenesisHash is the prev_hash of the first audit event.
const GenesisHash = genesisHash
