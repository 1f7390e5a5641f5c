package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// DataVersion returns a token that changes whenever a transaction commits
// to the database, from this process or any other sharing it (issue 15: the
// read-through session cache and the page cache keep what they read under
// it, so a change made through any replica is seen by every replica's next
// request). Equal tokens mean nothing was committed in between; a token says
// nothing about how much changed. It reads no table, so it costs about a
// "SELECT 1". ok is false where the database cannot tell (an in-memory
// SQLite database, whose one connection cannot be set aside): callers then
// cache nothing.
//
// Read it BEFORE reading the data kept under it. Data read after it are at
// least as new as the token, so a cache entry is never older than its
// token; anything committed after the read gives the next reader another
// token.
//
//   - SQLite: the header of the WAL index (the -shm file every connection
//     to the database maps), read without a query (shmHeader), or where it
//     cannot be read consistently PRAGMA data_version on a connection set
//     aside for it, which never writes and keeps the WAL index in place. "The integer values returned by two invocations of
//     PRAGMA data_version from the same connection will be different if
//     changes were committed to the database by any other connection in
//     the interim", including other processes, and the value is only
//     comparable on one connection
//     (https://sqlite.org/pragma.html#pragma_data_version). The token
//     carries a generation number that changes whenever that connection is
//     replaced, so two connections' values are never confused.
//   - PostgreSQL: portal_data_version_state()
//     (migrations/00024_data_version.sql, 00036_data_version_state.sql,
//     00040_data_version_lock.sql): a sequence every writing statement on a
//     table of this database bumps (a statement trigger on each, which
//     first takes a shared advisory lock its transaction holds to its end),
//     read before trying that lock exclusively: refused ("busy"), another
//     session's transaction has counted a write and not ended. While one
//     has, the version is used when it equals the last one read with none
//     open (the holder has counted nothing since: a long statement keeps
//     the pages cached); else it is read again after short pauses
//     (pgVersionWaits, 15 ms in all) and, if the write is still open, ok
//     false: cache nothing. A
//     session's idle-expiry refresh does not move it (migrations/00032:
//     nothing kept under the version shows an expiry); a new, changed or
//     deleted session does. Commits in other databases on
//     the same server do not move it (pg_current_snapshot(), used before,
//     is the whole server's, so they did). Reads move nothing. Concurrent
//     callers share reads that start after they called (versionFlights).
func (d *DB) DataVersion(ctx context.Context) (token string, ok bool, err error) {
	if d.dialect.postgres {
		token, err := d.pgVersion.read(ctx)
		if err != nil {
			return "", false, fmt.Errorf("store: data version: %w", err)
		}
		if token == "" {
			return "", false, nil // another session's write is in progress
		}
		return token, true, nil // "pg:" and the version (pgDataVersion)
	}
	if d.path == ":memory:" {
		return "", false, nil
	}
	return d.version.read(ctx, d.sql)
}

// sqliteVersion is the connection PRAGMA data_version runs on, and the
// WAL-index header it reads first when it can (shmHeader).
type sqliteVersion struct {
	mu   sync.RWMutex // conn, gen and shm: read under RLock, changed under Lock
	conn *sql.Conn
	gen  int
	path string     // the database file
	shm  *shmHeader // nil: not mapped (yet, or it cannot be)

	shmReads atomic.Int64 // versions read from the WAL-index header (for tests)

	// last is the token of the last header read: while the header is
	// unchanged, every request gets that string instead of formatting
	// its own (make bench, issue 33: a request's version read was a
	// twentieth of a cached page's cost, most of it the formatting).
	last atomic.Pointer[headerToken]

	uses useCommits // the versions only API uses made (ContentVersion)
}

type headerToken struct {
	gen    int
	header [walIndexHeaderSize]byte
	token  string
}

func (v *sqliteVersion) read(ctx context.Context, db *sql.DB) (string, bool, error) {
	// Every request reads the header first: under the shared lock, so
	// that readers never queue behind one another (a mutex here held an
	// fstat per request: 64 concurrent requests took turns); only the
	// PRAGMA and a new mapping take the lock alone.
	v.mu.RLock()
	t, ok := v.fromHeader()
	v.mu.RUnlock()
	if ok {
		return t, true, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.fromHeader(); ok {
		return t, true, nil
	}
	for range 2 {
		if v.conn == nil {
			c, err := db.Conn(ctx)
			if err != nil {
				return "", false, fmt.Errorf("store: data version: %w", err)
			}
			v.conn, v.gen = c, v.gen+1
			if v.shm != nil {
				v.shm.close()
				v.shm = nil
			}
		}
		var n int64
		err := v.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&n)
		if err == nil {
			if v.shm == nil && v.path != "" {
				// The connection has read the database, so its WAL index
				// exists; kept open by that connection, it stays as long.
				v.shm = openShmHeader(v.path + "-shm")
				if t, ok := v.fromHeader(); ok {
					return t, true, nil
				}
			}
			return fmt.Sprintf("sqlite:%d:%d", v.gen, n), true, nil
		}
		// A broken connection: set another aside, under a new generation
		// (its counter starts anywhere).
		v.conn.Close()
		v.conn = nil
		if ctx.Err() != nil {
			return "", false, fmt.Errorf("store: data version: %w", err)
		}
	}
	return "", false, fmt.Errorf("store: data version: no connection answers")
}

// fromHeader is the version read from the WAL-index header, when the
// connection is set aside and the header reads consistently.
func (v *sqliteVersion) fromHeader() (string, bool) {
	if v.conn == nil || v.shm == nil {
		return "", false
	}
	h, ok := v.shm.read()
	if !ok {
		return "", false
	}
	v.shmReads.Add(1)
	if l := v.last.Load(); l != nil && l.gen == v.gen && l.header == h {
		return l.token, true
	}
	t := headerTokenOf(v.gen, h)
	v.last.Store(&headerToken{gen: v.gen, header: h, token: t})
	return t, true
}

// headerTokenOf is the version token of WAL-index header h read on the
// connection of generation gen.
func headerTokenOf(gen int, h [walIndexHeaderSize]byte) string {
	return fmt.Sprintf("sqlite:wal:%d:%x", gen, h)
}

func (v *sqliteVersion) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shm != nil {
		v.shm.close()
		v.shm = nil
	}
	if v.conn != nil {
		v.conn.Close()
		v.conn = nil
	}
}

type dataVersionKey struct{}

// WithDataVersion returns ctx carrying token, the DataVersion read at the
// start of a request, for the session store's read-through cache.
func WithDataVersion(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, dataVersionKey{}, token)
}

// DataVersionFrom returns the token WithDataVersion put in ctx.
func DataVersionFrom(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(dataVersionKey{}).(string)
	return t, ok && t != ""
}
