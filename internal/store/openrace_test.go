package store_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
)

// Many processes open one new SQLite file at the same moment (replicas'
// init containers): each open succeeds. Switching a new file to WAL needs
// an exclusive lock; two openers that both read the file first deadlock,
// and SQLite answers one of them SQLITE_BUSY at once, without its busy
// timeout (TestConcurrentMigrate failed so in CI). Open retries that.
func TestConcurrentOpenNewFile(t *testing.T) {
	const rounds, openers = 200, 8
	for r := range rounds {
		path := filepath.Join(t.TempDir(), "portal.db")
		var wg sync.WaitGroup
		errs := make([]error, openers)
		for i := range openers {
			wg.Go(func() {
				db, err := store.Open(t.Context(), path)
				if err == nil {
					err = db.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, opener %d: %v", r, i, err)
			}
		}
	}
}
