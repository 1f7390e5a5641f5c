package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/pressly/goose/v3"
	sqlite "modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hyperpod-governance/portal/migrations"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrSchemaTooNew is returned when the database was migrated by a newer
// binary than this one: serving on it could corrupt data it does not know.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this binary")

// DB is the portal's database handle.
type DB struct {
	sql     *sql.DB
	path    string // the SQLite file, or the PostgreSQL URL with its password redacted
	dialect dialect
	version *sqliteVersion // DataVersion's connection (SQLite)

	pgVersion *versionFlights // DataVersion's reads (PostgreSQL)
	pgContent *versionFlights // ContentVersion's reads (PostgreSQL)

	// writer admits one of this process's write transactions at a time
	// (SQLite; nil on PostgreSQL, whose advisory lock queues writers).
	// Without it every writer waiting for SQLite's write lock spun in the
	// busy handler and failed with SQLITE_BUSY after busy_timeout (5 s):
	// under CPU starvation a concurrent writer test saw "begin: database
	// is locked" (TestSaveContractStopsAtMaxVersions, TestApproveConcurrent
	// beside a cold build). Queued here, a writer waits as long as its
	// context allows; only another process's writers still meet the busy
	// timeout.
	writer chan struct{}

	uses   useQueue   // RecordTokenUse's group commit
	tokens tokenCache // TokenAndUser's

	ckpt *checkpointer // SQLite's checkpoints, beside the writers (a file's; nil otherwise)
}

// Open opens the database dsn names. It does not migrate; call Migrate.
//
// A postgres:// or postgresql:// URL opens that PostgreSQL database (which
// must exist) through pgx. Anything else is the path of a SQLite file,
// created if needed, opened with WAL, foreign keys, a busy timeout and
// immediate write transactions. Errors and logs name the URL with its
// password redacted (RedactDSN).
func Open(ctx context.Context, dsn string) (*DB, error) {
	if dsn == "" {
		return nil, errors.New("store: open: empty database path")
	}
	if isPostgresURL(dsn) {
		name := RedactDSN(dsn)
		db, err := openPostgres(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", name, err)
		}
		d := &DB{sql: db, path: name, dialect: dialectPostgres}
		d.pgVersion = &versionFlights{query: pgDataVersion(db, pgFullVersion, pgVersionWaits), gap: pgVersionGap}
		d.pgContent = &versionFlights{query: pgDataVersion(db, pgContentVersion, pgVersionWaits), gap: pgVersionGap}
		return d, nil
	}
	path := dsn
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("store: open: create directory for %s: %w", path, err)
		}
		// The database holds sessions and the audit log: owner-only (0600).
		// SQLite creates the -wal and -shm files with the database file's
		// permissions, so creating it 0600 first covers them too; an older
		// file created under a looser umask is tightened here.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
		f.Close()
		if err := restrictFiles(path); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	// The busy timeout first: the pragmas run in this order on every new
	// connection, and switching a new file to WAL takes a lock that another
	// process opening it at the same moment holds (TestConcurrentMigrate saw
	// "database is locked" at open with the timeout set after it).
	// cache_size: each connection's page cache at about 500 KiB rather
	// than SQLite's default 2,000 KiB. It lives outside the Go heap
	// (modernc.org/libc's allocator); on make bench's database of
	// 1,000,000 audit events, the minute's AuditHeadsEvery after the API's
	// run (its uses are events; it then read the whole trail once per
	// milestone) raised the portal's RSS by about 20 MiB while it ran with
	// the default, and not measurably with 500 KiB. Any long scan does the
	// same (a review over 10,000 connections, an audit export). The
	// busy pages are served from the page cache (web/pagecache.go), and in
	// WAL mode a connection drops its whole cache at its next read after
	// any other connection's commit anyway.
	// wal_autocheckpoint: the checkpoint in a writer's commit is a backstop
	// only; the checkpointer runs them beside the writers (checkpoint.go).
	for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)", "cache_size(-500)",
		fmt.Sprintf("wal_autocheckpoint(%d)", walBackstopFrames)} {
		q.Add("_pragma", p)
	}
	// BEGIN IMMEDIATE takes the write lock up front, so two writers queue on
	// the busy timeout instead of failing with SQLITE_BUSY on lock upgrade.
	q.Set("_txlock", "immediate")
	dsn = "file:" + path + "?" + q.Encode()
	conn, err := newSQLiteConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := sql.OpenDB(conn)
	// SQLite allows one writer; a small pool keeps readers concurrent.
	// Kept open when idle: database/sql keeps 2 by default, so under load
	// every request beyond the second opened (and prepared) anew.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	if path == ":memory:" {
		db.SetMaxOpenConns(1) // each connection would get its own empty in-memory database
	}
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := pingSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if path != ":memory:" {
		if err := restrictFiles(path); err != nil {
			db.Close()
			return nil, err
		}
	}
	d := &DB{sql: db, path: path, dialect: dialectSQLite, version: &sqliteVersion{path: path}, writer: make(chan struct{}, 1)}
	if path != ":memory:" {
		d.ckpt = startCheckpointer(db, path)
	}
	return d, nil
}

// OpenReadOnly opens an existing portal database for reading only: what
// `portal audit verify` and `audit head` check must be the database that is
// there, so nothing is created, migrated or written. A SQLite path that does
// not exist, or a database without the portal's schema (a new empty file,
// another application's database), is an error that says so: a mistyped
// --db, or the default path run from the wrong directory, must not pass as
// "0 events verified" (issue 32 item 7). PostgreSQL sessions run with
// default_transaction_read_only.
func OpenReadOnly(ctx context.Context, dsn string) (*DB, error) {
	if dsn == "" {
		return nil, errors.New("store: open: empty database path")
	}
	var d *DB
	if isPostgresURL(dsn) {
		name := RedactDSN(dsn)
		db, err := openPostgresWith(ctx, dsn, map[string]string{"default_transaction_read_only": "on"})
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", name, err)
		}
		d = &DB{sql: db, path: name, dialect: dialectPostgres}
	} else {
		if dsn == ":memory:" {
			return nil, errors.New("store: open :memory: read-only: an in-memory database is always empty")
		}
		fi, err := os.Stat(dsn)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("store: open %s: no database at this path (nothing was created; check --db or PORTAL_DB)", dsn)
		}
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", dsn, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("store: open %s: not a database file", dsn)
		}
		q := url.Values{}
		q.Set("mode", "ro")
		for _, p := range []string{"busy_timeout(5000)", "query_only(1)"} {
			q.Add("_pragma", p)
		}
		conn, err := newSQLiteConnector("file:" + dsn + "?" + q.Encode())
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", dsn, err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(2)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("store: open %s: %w", dsn, err)
		}
		d = &DB{sql: db, path: dsn, dialect: dialectSQLite}
	}
	// The portal's schema: the audit trail's table must be there.
	var n int64
	if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_events`).Scan(&n); err != nil {
		d.Close()
		return nil, fmt.Errorf("store: open %s: no portal schema here (the database is empty or not the portal's; check --db or PORTAL_DB): %w", d.path, err)
	}
	return d, nil
}

// pingSQLite opens the pool's first connection, which runs the pragmas.
// On a new file, journal_mode(WAL) reads the file and then needs an
// exclusive lock; two processes doing so at once each hold the shared lock
// the other waits on, and SQLite then answers one of them SQLITE_BUSY at
// once rather than call its busy handler ("If SQLite determines that
// invoking the busy handler could result in a deadlock, it will go ahead
// and return SQLITE_BUSY", sqlite.org/c3ref/busy_handler.html). The other
// switches the file to WAL, which persists, so a retry succeeds; retries
// stop after the busy timeout's 5 s or when ctx ends.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		}
	}
}

// restrictFiles makes the database file and its -wal and -shm files, where
// they exist, readable and writable by the owner only.
func restrictFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: open %s: %w", path, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("store: open %s: restrict permissions of %s: %w", path, p, err)
			}
		}
	}
	return nil
}

// Close closes the database.
func (d *DB) Close() error {
	// The reads' uses still queued (QueueTokenUse) commit first.
	d.uses.close()
	if d.ckpt != nil {
		d.ckpt.close()
	}
	if d.version != nil {
		d.version.close()
	}
	return d.sql.Close()
}

// Ping checks that the database answers a query.
func (d *DB) Ping(ctx context.Context) error {
	var one int
	if err := d.sql.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

func (d *DB) provider() (*goose.Provider, error) {
	fsys, err := dialectFS(d.dialect, migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	opts, err := d.dialect.migrationLock(d.path)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	p, err := goose.NewProvider(d.dialect.goose(), d.sql, fsys,
		append(opts, goose.WithDisableGlobalRegistry(true))...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// SchemaStatus reports the database's schema version and the newest version
// this binary knows.
type SchemaStatus struct {
	Current int64
	Known   int64
}

// Status returns the schema versions without changing anything.
func (d *DB) Status(ctx context.Context) (SchemaStatus, error) {
	p, err := d.provider()
	if err != nil {
		return SchemaStatus{}, err
	}
	cur, known, err := p.GetVersions(ctx)
	if err != nil {
		return SchemaStatus{}, fmt.Errorf("store: schema status: %w", err)
	}
	return SchemaStatus{Current: cur, Known: known}, nil
}

// Migrate applies every pending migration, each in its own transaction. It
// refuses (ErrSchemaTooNew) when the database is ahead of this binary.
func (d *DB) Migrate(ctx context.Context) (SchemaStatus, error) {
	st, err := d.Status(ctx)
	if err != nil {
		return st, err
	}
	if st.Current > st.Known {
		return st, fmt.Errorf("%w: database is at version %d, this binary knows up to %d; run the newer portal or restore a backup", ErrSchemaTooNew, st.Current, st.Known)
	}
	p, err := d.provider()
	if err != nil {
		return st, err
	}
	if _, err := p.Up(ctx); err != nil {
		return st, fmt.Errorf("store: migrate: %w", err)
	}
	return d.Status(ctx)
}

// now formats a time the way every table stores it: UTC RFC 3339 with
// nanoseconds, which sorts as text.
func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// timeLayout is fixed-width (RFC3339Nano drops trailing zeros, so ".55"
// would sort before ".5" as text).
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// ExecForTest runs raw statements. Tests of other packages use it to tamper
// with data the way an attacker with file access would; the portal never
// calls it.
func (d *DB) ExecForTest(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if _, err := d.sql.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("store: exec: %w", err)
		}
	}
	return nil
}

// inTx runs f in one write transaction, serialized with every other write
// transaction on the database (dialect.beginWrite; on SQLite this process's
// writers queue on d.writer first), and commits, or rolls back on any
// error. f must not start another write transaction of d: it would wait for
// itself until ctx ends.
func (d *DB) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	return d.inTxWith(ctx, pgWriterLock, f, nil)
}

// inTxWith is inTx that begins with lock (beginWrite) and calls ended,
// when not nil, once f has run and the transaction has committed (err nil)
// or rolled back (err f's or the commit's), before this process's next
// writer may begin (inUsesTx).
func (d *DB) inTxWith(ctx context.Context, lock string, f func(*sql.Tx) error, ended func(err error)) error {
	if d.writer != nil {
		select {
		case d.writer <- struct{}{}:
			defer func() { <-d.writer }()
		case <-ctx.Done():
			return fmt.Errorf("store: begin: waiting for the other writers: %w", ctx.Err())
		}
	}
	tx, err := d.dialect.beginWrite(ctx, d.sql, lock)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	err = f(tx)
	if err != nil {
		_ = tx.Rollback()
	} else if err = tx.Commit(); err != nil {
		err = fmt.Errorf("store: commit: %w", err)
	}
	if ended != nil {
		ended(err)
	}
	return err
}

// queryer is satisfied by *sql.DB and *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// column runs a query of one column and returns its values in order.
func column[T any](ctx context.Context, q queryer, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
