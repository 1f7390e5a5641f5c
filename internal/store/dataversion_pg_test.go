package store_test

import (
	"bytes"
	"database/sql"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// openPG opens a new migrated PostgreSQL database (whatever the pass: the
// data version's PostgreSQL rules), and a plain connection pool on it.
func openPG(t *testing.T) (*store.DB, *sql.DB) {
	t.Helper()
	dsn := newPostgresDSN(t)
	db, err := store.OpenMigrated(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return db, raw
}

// TestPostgresDataVersionIsTheDatabases: a commit in another database on the
// same server leaves this database's data version alone (it used to be
// pg_current_snapshot(), the whole server's: every commit anywhere dropped
// every replica's cached pages), and a commit here still moves it.
func TestPostgresDataVersionIsTheDatabases(t *testing.T) {
	db, _ := openPG(t)
	other, _ := openPG(t)
	ctx := t.Context()
	v := dataVersion(t, db)
	ss, err := other.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := ss.CommitCtx(ctx, "tok", []byte{byte(i)}, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if got := dataVersion(t, db); got != v {
		t.Errorf("commits in another database moved this one's data version: %q -> %q", v, got)
	}
	mine, err := db.Sessions(key('a'))
	if err != nil {
		t.Fatal(err)
	}
	if err := mine.CommitCtx(ctx, "tok", []byte{1}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := dataVersion(t, db); got == v {
		t.Errorf("a commit in this database left its data version at %q", v)
	}
}

// TestPostgresDataVersionWhileAWriteIsOpen: while another session's
// transaction has written and not yet ended, there is no data version (a
// page read now might miss that write although the sequence has counted
// it): nothing is cached. Once it commits, there is one again, new.
func TestPostgresDataVersionWhileAWriteIsOpen(t *testing.T) {
	db, raw := openPG(t)
	ctx := t.Context()
	v := dataVersion(t, db)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE cost_input_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.DataVersion(ctx); ok || err != nil {
		t.Errorf("with a write in progress: DataVersion = %q, %v, %v; want none", got, ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := dataVersion(t, db); got == v {
		t.Errorf("after the commit the data version is still %q", v)
	}
	// A transaction that only reads holds no write lock.
	rtx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM connections`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	dataVersion(t, db)
}

// TestPostgresDataVersionThroughALongStatement: another session holding a
// write lock whose statement has not ended (here a LOCK, as a long DELETE
// holds one before its statement trigger counts it) leaves the data
// version as it was when no lock was held: the committed data are still
// that version's, so pages stay cached (migrations/00036). Once its
// statement has ended, the version counts a write that is not visible yet:
// no version until it commits, then a new one.
func TestPostgresDataVersionThroughALongStatement(t *testing.T) {
	db, raw := openPG(t)
	db.SetPGVersionWaits(nil)
	ctx := t.Context()
	v := dataVersion(t, db)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE cost_input_version IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.DataVersion(ctx); !ok || err != nil || got != v {
		t.Errorf("with a write lock held and no statement ended: DataVersion = %q, %v, %v; want %q, the version before", got, ok, err, v)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE cost_input_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.DataVersion(ctx); ok || err != nil {
		t.Errorf("with a written statement not committed: DataVersion = %q, %v, %v; want none", got, ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := dataVersion(t, db); got == v {
		t.Errorf("after the commit the data version is still %q", v)
	}
}

// pgProcesses makes a migrated PostgreSQL database (prepare, if not nil,
// writes to it first) and returns a raw handle on it and newProcess, which
// opens the store as a new process would: no data version read yet, no
// pauses between reads (SetPGVersionWaits(nil)). Both close at the test's
// end.
func pgProcesses(t *testing.T, prepare func(*store.DB)) (raw *sql.DB, newProcess func() *store.DB) {
	t.Helper()
	dsn := newPostgresDSN(t)
	migrated, err := store.OpenMigrated(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(migrated)
	}
	migrated.Close()
	if raw, err = sql.Open("pgx", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw, func() *store.DB {
		db, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.SetPGVersionWaits(nil)
		return db
	}
}

// TestPostgresDataVersionNeedsACleanRead: a process whose first read finds
// a write counted and not committed has no version to trust yet: none,
// until a read with no such write open. (A write lock alone, a statement
// not ended, is not such a write since migrations/00040:
// TestPostgresDataVersionThroughALongStatement.)
func TestPostgresDataVersionNeedsACleanRead(t *testing.T) {
	ctx := t.Context()
	raw, newProcess := pgProcesses(t, nil)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE cost_input_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	db := newProcess()
	if got, ok, err := db.DataVersion(ctx); ok || err != nil {
		t.Errorf("a first read with a write open: DataVersion = %q, %v, %v; want none", got, ok, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.DataVersion(ctx); !ok || err != nil {
		t.Errorf("a read with no write open: DataVersion = %q, %v, %v; want the version", got, ok, err)
	}
}

// TestPostgresDataVersionThroughAnExpiryRefresh: a session's idle-expiry
// refresh (an UPDATE of the sessions row that changes no data) counts no
// write (migrations/00032) and so holds no data-version lock
// (migrations/00040): while one is open, even a process's first read gets
// the version, with no pause (before 00040 its row lock made every page
// view of that moment wait or render uncached). A refresh that changes
// the data counts one: no version until it ends.
func TestPostgresDataVersionThroughAnExpiryRefresh(t *testing.T) {
	ctx := t.Context()
	raw, newProcess := pgProcesses(t, func(migrated *store.DB) {
		sessions, err := migrated.Sessions(bytes.Repeat([]byte("k"), 32))
		if err != nil {
			t.Fatal(err)
		}
		if err := sessions.CommitCtx(ctx, "tok-a", []byte("data-1"), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	})
	db := newProcess()
	for _, c := range []struct {
		what, update string
		counts       bool
	}{
		{"an expiry refresh", `UPDATE sessions SET expiry = expiry + 60`, false},
		{"a data change", `UPDATE sessions SET data = data || '!'::bytea`, true},
	} {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, c.update); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := db.DataVersion(ctx); ok == c.counts || err != nil {
			t.Errorf("%s open: DataVersion = %q, %v, %v; want a version: %v", c.what, got, ok, err, !c.counts)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresDataVersionWaitsOutAShortWrite: a read that finds another
// session's write in progress reads again after a pause (pgVersionWaits);
// when the write has ended by then, the request gets the version that
// write made, new, and caches under it instead of rendering uncached. The
// pauses here are long enough for the commit below on a loaded machine;
// the test above shows that a write still open after every pause leaves
// no version at all.
func TestPostgresDataVersionWaitsOutAShortWrite(t *testing.T) {
	db, raw := openPG(t)
	db.SetPGVersionWaits([]time.Duration{5 * time.Millisecond, time.Second, 10 * time.Second})
	ctx := t.Context()
	v := dataVersion(t, db)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE cost_input_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		committed <- tx.Commit()
	}()
	got, ok, err := db.DataVersion(ctx)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if !ok || err != nil {
		t.Fatalf("a write that ends within the pauses: DataVersion = %q, %v, %v; want the version after it", got, ok, err)
	}
	if got == v {
		t.Errorf("DataVersion after the write = %q, the version before it", got)
	}
	if now := dataVersion(t, db); now != got {
		t.Errorf("DataVersion read during the write = %q, after it %q: the wait returned before the commit was visible", got, now)
	}
}

// TestPostgresSessionExpiryKeepsTheDataVersion: a session commit that only
// moves its expiry (the idle refresh) leaves the data version as it was
// (migrations/00032: nothing kept under the version shows an expiry), so
// no cached page is rendered again for it; a new session, changed session
// data and a sign-out each move it (the page cache and FindCtx rely on
// that), as does a refresh's companion case, the same data under a new
// token.
func TestPostgresSessionExpiryKeepsTheDataVersion(t *testing.T) {
	db, _ := openPG(t)
	ctx := t.Context()
	sessions, err := db.Sessions(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	step := func(what string, commit func() error, moves bool) {
		t.Helper()
		before := dataVersion(t, db)
		if err := commit(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if after := dataVersion(t, db); (after != before) != moves {
			t.Errorf("%s: data version %q -> %q; want moved %v", what, before, after, moves)
		}
	}
	step("a new session", func() error { return sessions.CommitCtx(ctx, "tok-a", []byte("data-1"), exp) }, true)
	step("its expiry refreshed", func() error { return sessions.CommitCtx(ctx, "tok-a", []byte("data-1"), exp.Add(time.Minute)) }, false)
	step("its expiry refreshed again", func() error { return sessions.CommitCtx(ctx, "tok-a", []byte("data-1"), exp.Add(2*time.Minute)) }, false)
	step("its data changed", func() error { return sessions.CommitCtx(ctx, "tok-a", []byte("data-2"), exp.Add(2*time.Minute)) }, true)
	step("a second session, same data", func() error { return sessions.CommitCtx(ctx, "tok-b", []byte("data-2"), exp) }, true)
	step("a sign-out", func() error { return sessions.DeleteCtx(ctx, "tok-a") }, true)
	if b, ok, err := sessions.FindCtx(ctx, "tok-b"); err != nil || !ok || string(b) != "data-2" {
		t.Errorf("FindCtx(tok-b) = %q, %v, %v", b, ok, err)
	}
}

// TestPostgresEveryTableBumpsTheDataVersion: every table of the schema has
// the statement trigger that moves the data version; a table a later
// migration adds without it would be cached past its changes.
func TestPostgresEveryTableBumpsTheDataVersion(t *testing.T) {
	_, raw := openPG(t)
	rows, err := raw.QueryContext(t.Context(), `
SELECT t.tablename FROM pg_tables t
WHERE t.schemaname = current_schema()
  AND NOT EXISTS (
    SELECT 1 FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE g.tgname = 'portal_data_changed' AND c.relname = t.tablename AND n.nspname = t.schemaname)
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var missing []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		missing = append(missing, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("tables without the portal_data_changed trigger (add it in their migration): %v", missing)
	}
	var tables int
	if err := raw.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil || tables < 20 {
		t.Errorf("%d tables in the schema (%v): the check looked at the wrong schema", tables, err)
	}
}
