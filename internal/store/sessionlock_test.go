package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
)

// A session advisory lock is held by one pool's connection at a time,
// until it is released or its session ends (pg_terminate_backend, as when
// the process dies): then Check fails on the holder and another pool takes
// the lock.
func TestSessionAdvisoryLock(t *testing.T) {

	dsn := newPostgresDSN(t)
	a, err := store.OpenMigrated(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !a.Postgres() {
		t.Fatal("Postgres() is false on PostgreSQL")
	}
	const key = 0x706f7274616c7465 // this test's own
	la, err := a.TryAdvisoryLock(t.Context(), key)
	if err != nil || la == nil {
		t.Fatalf("a: %v, %v", la, err)
	}
	if lb, err := b.TryAdvisoryLock(t.Context(), key); err != nil || lb != nil {
		t.Fatalf("b took the lock a holds: %v, %v", lb, err)
	}
	if err := la.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	la.Release(t.Context())
	lb, err := b.TryAdvisoryLock(t.Context(), key)
	if err != nil || lb == nil {
		t.Fatalf("b after a released: %v, %v", lb, err)
	}
	// The holder's session ends from outside. With a timeout,
	// pg_terminate_backend waits until the backend has exited (PostgreSQL
	// 14+ docs, 9.27.2 Server Signaling Functions), its locks released.
	raw := a.RawSQL()
	if _, err := raw.ExecContext(t.Context(), `SELECT pg_terminate_backend(pid, 30000) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND objid::bigint = ? AND objsubid = 1`, int64(key&0xffffffff)); err != nil {
		t.Fatal(err)
	}
	if err := lb.Check(t.Context()); err == nil {
		t.Fatal("Check passes on a terminated session")
	}
	lb.Release(t.Context())
	la, err = a.TryAdvisoryLock(t.Context(), key)
	if err != nil || la == nil {
		t.Fatalf("a after b's session ended: %v, %v", la, err)
	}
	la.Release(t.Context())
}

// On SQLite the lock is a flock on a file beside the database: one
// opener holds it at a time, even two in one process; Release hands it
// on; another key is another lock; an in-memory database has none.
func TestFileLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "portal.db")
	a, err := store.OpenMigrated(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, err := a.TryAdvisoryLock(t.Context(), 42)
	if err != nil || la == nil || a.Postgres() {
		t.Fatalf("a: %v, %v", la, err)
	}
	if err := la.Check(t.Context()); err != nil {
		t.Error(err)
	}
	if lb, err := b.TryAdvisoryLock(t.Context(), 42); err != nil || lb != nil {
		t.Errorf("b took the lock a holds: %v, %v", lb, err)
	}
	if again, err := a.TryAdvisoryLock(t.Context(), 42); err != nil || again != nil {
		t.Errorf("a second take by a succeeded: %v, %v", again, err)
	}
	other, err := b.TryAdvisoryLock(t.Context(), 43)
	if err != nil || other == nil {
		t.Errorf("another key: %v, %v", other, err)
	} else {
		other.Release(t.Context())
	}
	la.Release(t.Context())
	lb, err := b.TryAdvisoryLock(t.Context(), 42)
	if err != nil || lb == nil {
		t.Fatalf("after a's release b cannot take the lock: %v, %v", lb, err)
	}
	lb.Release(t.Context())
	if _, err := os.Stat(path + ".lock-2a"); err != nil {
		t.Errorf("the lock file: %v", err)
	}

	mem, err := store.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if l, err := mem.TryAdvisoryLock(t.Context(), 42); !errors.Is(err, store.ErrNoLockFile) || l != nil {
		t.Errorf("in memory: %v, %v", l, err)
	}
}
