package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"
)

// lockedSession is a session store (refresh granularity a minute) whose
// session "tok" (hash h) holds data until exp, with another process
// holding SQLite's write lock until unlock is called.
func lockedSession(t *testing.T) (st *SessionStore, db *DB, h string, data []byte, exp time.Time, unlock func()) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "portal.db")
	db, err := OpenMigrated(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err = db.Sessions(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	st.SetRefreshGranularity(time.Minute)
	data, exp = []byte("the session"), time.Now().Add(time.Hour)
	if err := st.CommitCtx(ctx, "tok", data, exp); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	locked := true
	unlock = func() {
		if locked {
			locked = false
			if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unlock)
	return st, db, st.hash("tok"), data, exp, unlock
}

// inFlight starts commit in the background and returns once st marks h
// as being written (the write lock holds it there).
func inFlight(t *testing.T, st *SessionStore, h string, commit func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- commit() }()
	for {
		st.mu.Lock()
		_, writing := st.writing[h]
		st.mu.Unlock()
		if writing {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("the commit returned (%v) while the write lock is held", err)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestSessionChangeWritesOnce: the concurrent requests of a session that
// all commit the same new data (a group re-check's result, which
// internal/web's recheckGate hands every request in flight) write it
// once: while one commit writes it, the others with the same data and an
// expiry within the granularity return at once. Other new data still
// write.
func TestSessionChangeWritesOnce(t *testing.T) {
	ctx := context.Background()
	st, db, h, _, exp, unlock := lockedSession(t)
	rechecked := []byte("the session, re-checked")
	first := inFlight(t, st, h, func() error { return st.CommitCtx(ctx, "tok", rechecked, exp.Add(time.Second)) })
	second := make(chan error, 1)
	go func() { second <- st.CommitCtx(ctx, "tok", rechecked, exp.Add(2*time.Second)) }()
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second): // a failsafe, not a speed figure: the commit should not wait at all
		t.Fatal("a second commit of the same new data waited for the writer instead of leaving it to the one in flight")
	}
	unlock()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := db.sql.QueryRowContext(ctx, `SELECT data FROM sessions WHERE token_hash = ?`, h).Scan(&stored); err != nil || !bytes.Equal(stored, rechecked) {
		t.Errorf("stored %q, %v; want the re-checked data", stored, err)
	}
	other := []byte("the session, with a flash message")
	if err := st.CommitCtx(ctx, "tok", other, exp.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRowContext(ctx, `SELECT data FROM sessions WHERE token_hash = ?`, h).Scan(&stored); err != nil || !bytes.Equal(stored, other) {
		t.Errorf("other new data: stored %q, %v; want them written", stored, err)
	}
}

// When a session's expiry is due for its refresh, the concurrent requests
// of that session write it once: while one commit writes the new expiry,
// the others with the same data and an expiry within the granularity of
// it return at once instead of queueing for the writer one after another.
// A commit that changes the data still writes. Without claimCommit's
// in-flight check, the second commit below waits for the write lock the
// other store holds.
func TestSessionRefreshWritesOnce(t *testing.T) {
	ctx := context.Background()
	st, db, h, data, exp, unlock := lockedSession(t)
	defer unlock()

	due := exp.Add(2 * time.Minute)
	first := inFlight(t, st, h, func() error { return st.CommitCtx(ctx, "tok", data, due) })
	second := make(chan error, 1)
	go func() { second <- st.CommitCtx(ctx, "tok", data, due.Add(time.Second)) }()
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second): // a failsafe, not a speed figure: the commit should not wait at all
		t.Fatal("a second refresh of the same session waited for the writer instead of leaving it to the one in flight")
	}
	unlock()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var stored int64
	if err := db.sql.QueryRowContext(ctx, `SELECT expiry FROM sessions WHERE token_hash = ?`, h).Scan(&stored); err != nil || stored != due.UnixNano() {
		t.Errorf("stored expiry %d, %v; want the first refresh's %d", stored, err, due.UnixNano())
	}
	st.mu.Lock()
	left := len(st.writing)
	st.mu.Unlock()
	if left != 0 {
		t.Errorf("%d refreshes still marked in flight", left)
	}

	// New data always write, in flight refresh or not.
	changed := []byte("the session, changed")
	if err := st.CommitCtx(ctx, "tok", changed, due.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.FindCtx(ctx, "tok")
	if err != nil || !ok || !bytes.Equal(got, changed) {
		t.Errorf("after a change: %q, %v, %v", got, ok, err)
	}
}
