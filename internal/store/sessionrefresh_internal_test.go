package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"
)

// When a session's expiry is due for its refresh, the concurrent requests
// of that session write it once: while one commit writes the new expiry,
// the others with the same data and an expiry within the granularity of
// it return at once instead of queueing for the writer one after another.
// A commit that changes the data still writes. Without claimCommit's
// in-flight check, the second commit below waits for the write lock the
// other store holds.
func TestSessionRefreshWritesOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "portal.db")
	db, err := OpenMigrated(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := bytes.Repeat([]byte("k"), 32)
	st, err := db.Sessions(key)
	if err != nil {
		t.Fatal(err)
	}
	st.SetRefreshGranularity(time.Minute)
	data := []byte("the session")
	exp := time.Now().Add(time.Hour)
	if err := st.CommitCtx(ctx, "tok", data, exp); err != nil {
		t.Fatal(err)
	}
	h := st.hash("tok")

	// Another process holds SQLite's write lock.
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.sql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()

	due := exp.Add(2 * time.Minute)
	first := make(chan error, 1)
	go func() { first <- st.CommitCtx(ctx, "tok", data, due) }()
	for {
		st.mu.Lock()
		_, writing := st.refreshing[h]
		st.mu.Unlock()
		if writing {
			break
		}
		select {
		case err := <-first:
			t.Fatalf("the refresh returned (%v) while the write lock is held", err)
		case <-time.After(time.Millisecond):
		}
	}
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
	left := len(st.refreshing)
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
