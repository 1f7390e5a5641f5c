package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
)

// A session advisory lock is held by one pool's connection at a time,
// until it is released or its session ends (pg_terminate_backend, as when
// the process dies): then Check fails on the holder and another pool takes
// the lock. SQLite has no advisory locks.
func TestSessionAdvisoryLock(t *testing.T) {
	lite, err := store.OpenMigrated(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if l, err := lite.TryAdvisoryLock(t.Context(), 42); !errors.Is(err, store.ErrNotPostgres) || l != nil || lite.Postgres() {
		t.Errorf("on SQLite: %v, %v", l, err)
	}

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
