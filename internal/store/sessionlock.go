package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// ErrNotPostgres is returned by TryAdvisoryLock on SQLite, which has no
// advisory locks.
var ErrNotPostgres = errors.New("store: advisory locks need PostgreSQL")

// Postgres reports whether the database is PostgreSQL (else SQLite).
func (d *DB) Postgres() bool { return d.dialect.postgres }

// SessionLock is a PostgreSQL session-level advisory lock held on one
// connection taken out of the pool (database/sql's DB.Conn) for as long as
// the lock is held. The server releases the lock when that session ends,
// whatever ends it: Release, the process's death (kill -9, a lost node:
// the server sees the socket close) or pg_terminate_backend.
type SessionLock struct {
	conn *sql.Conn
	key  int64
}

// TryAdvisoryLock tries to take the session-level advisory lock key
// (pg_try_advisory_lock, which does not wait) on a connection of its own.
// It returns the held lock, or nil when another session holds it; the
// connection goes back to the pool then. "Once acquired at session level,
// an advisory lock is held until explicitly released or the session ends"
// (PostgreSQL docs, 13.3.5 Advisory Locks).
func (d *DB) TryAdvisoryLock(ctx context.Context, key int64) (*SessionLock, error) {
	if !d.dialect.postgres {
		return nil, ErrNotPostgres
	}
	conn, err := d.sql.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: advisory lock: a connection: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, key).Scan(&got); err != nil {
		discard(conn) // the lock may be held by a session we can no longer reach
		return nil, fmt.Errorf("store: advisory lock: %w", err)
	}
	if !got {
		conn.Close()
		return nil, nil
	}
	return &SessionLock{conn: conn, key: key}, nil
}

// Check runs a cheap query on the lock's connection: nil while the session
// (and so the lock) lives. After an error the lock must be taken as lost:
// call Release, which closes the connection rather than reuse it.
func (l *SessionLock) Check(ctx context.Context) error {
	var one int
	if err := l.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: advisory lock's session: %w", err)
	}
	return nil
}

// Release gives the lock up: pg_advisory_unlock, and the connection back
// to the pool. If that fails (the session is gone or unreachable) the
// connection is closed instead, which ends the session and its lock.
func (l *SessionLock) Release(ctx context.Context) {
	var ok bool
	if err := l.conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(?)`, l.key).Scan(&ok); err != nil || !ok {
		discard(l.conn)
		return
	}
	l.conn.Close()
}

// discard closes conn's driver connection instead of returning it to the
// pool: database/sql drops a connection whose Raw function returns
// driver.ErrBadConn (sql.Conn.Raw's doc).
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// RecordSingletonHolder writes owner as the holder of the singletons row
// name, whoever held it before: for an election decided elsewhere (an
// advisory lock), where the row only tells the others who won.
func (d *DB) RecordSingletonHolder(ctx context.Context, name, owner string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO singletons (name, owner, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
			name, owner, fmtTime(now), fmtTime(now))
		if err != nil {
			return fmt.Errorf("store: record the holder of %s: %w", name, err)
		}
		return nil
	})
}
