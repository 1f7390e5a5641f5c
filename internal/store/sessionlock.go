package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrNoLockFile is returned by TryAdvisoryLock on an in-memory SQLite
// database, which has no file to lock beside it.
var ErrNoLockFile = errors.New("store: an in-memory SQLite database has no file to lock")

// Postgres reports whether the database is PostgreSQL (else SQLite).
func (d *DB) Postgres() bool { return d.dialect.postgres }

// SessionLock is a lock held for as long as this process holds it and
// lives: on PostgreSQL a session-level advisory lock held on one
// connection taken out of the pool (database/sql's DB.Conn); on SQLite an
// exclusive flock on a file beside the database. Either is dropped by
// Release or by the process's death, whatever ends it: on PostgreSQL the
// server releases the lock when the session ends (kill -9, a lost node:
// the server sees the socket close; pg_terminate_backend), on SQLite the
// kernel drops the flock when the process's descriptor closes.
type SessionLock struct {
	conn *sql.Conn // PostgreSQL
	key  int64
	file *os.File // SQLite
}

// TryAdvisoryLock tries to take the lock key without waiting. It returns
// the held lock, or nil when another holds it.
//
//   - PostgreSQL: pg_try_advisory_lock(key) on a connection of its own,
//     which goes back to the pool when the lock is not taken. "Once
//     acquired at session level, an advisory lock is held until explicitly
//     released or the session ends" (PostgreSQL docs, 13.3.5 Advisory
//     Locks).
//   - SQLite: flock(LOCK_EX|LOCK_NB) on the file beside the database named
//     by the key (lockFile). flock locks belong to the open file
//     description, so two opens conflict even within one process, and they
//     are independent of the POSIX locks SQLite takes on the database
//     itself (flock(2)); in WAL mode, which the store uses, "all processes
//     using a database must be on the same host computer; WAL does not
//     work over a network filesystem" (https://sqlite.org/wal.html), so a
//     lock of that host's kernel is the whole truth. Nothing is written to the
//     database: an idle leader commits nothing (issue 15: every commit
//     moves the data version, and the page and session caches with it).
func (d *DB) TryAdvisoryLock(ctx context.Context, key int64) (*SessionLock, error) {
	if !d.dialect.postgres {
		return d.tryFileLock(key)
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

// lockFile is the file beside the SQLite database whose flock is the lock
// key.
func (d *DB) lockFile(key int64) string { return fmt.Sprintf("%s.lock-%x", d.path, uint64(key)) }

func (d *DB) tryFileLock(key int64) (*SessionLock, error) {
	if d.path == ":memory:" {
		return nil, ErrNoLockFile
	}
	f, err := tryFlock(d.lockFile(key))
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	if f == nil {
		return nil, nil
	}
	return &SessionLock{file: f}, nil
}

// Check runs a cheap query on the lock's connection: nil while the session
// (and so the lock) lives. After an error the lock must be taken as lost:
// call Release, which closes the connection rather than reuse it. A file
// lock is held while its descriptor is open: nil.
func (l *SessionLock) Check(ctx context.Context) error {
	if l.file != nil {
		return nil
	}
	var one int
	if err := l.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: advisory lock's session: %w", err)
	}
	return nil
}

// Release gives the lock up: pg_advisory_unlock, and the connection back
// to the pool. If that fails (the session is gone or unreachable) the
// connection is closed instead, which ends the session and its lock. On
// SQLite it closes the lock file.
func (l *SessionLock) Release(ctx context.Context) {
	if l.file != nil {
		l.file.Close() // closing the last descriptor releases the flock
		return
	}
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
