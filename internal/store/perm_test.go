package store_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestDatabaseFilesOwnerOnly: the database and its -wal and -shm files hold
// sessions and the audit log, so they are 0600 whatever the umask, and a
// file created earlier under a looser mode is tightened on open.
func TestDatabaseFilesOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual default; without the fix files come out 0644
	t.Cleanup(func() { syscall.Umask(old) })

	for _, pre := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "portal.db")
		if pre {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		db, err := store.Open(t.Context(), path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if _, err := db.RecordLogin(t.Context(), "https://idp", "alice", "alice@example.com", "Alice", []string{"team-red-members"}, time.Now()); err != nil {
			t.Fatalf("RecordLogin: %v", err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("pre-existing=%v: %v (WAL mode should keep -wal and -shm while open)", pre, err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("pre-existing=%v: %s has mode %o, want 600", pre, filepath.Base(p), got)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
