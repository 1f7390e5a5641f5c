package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestSQLiteWritersQueueBeyondTheBusyTimeout: a write transaction that
// waits for another of the same process's to end waits as long as its
// context allows, not SQLite's busy timeout (5 s): the holder here keeps
// the write lock 5.5 s, and the second writer commits after it. A writer
// whose context ends while it waits gets an error saying so, and nothing
// of it is written.
func TestSQLiteWritersQueueBeyondTheBusyTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("holds SQLite's write lock past its 5 s busy timeout")
	}
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ExecForTest(ctx, `CREATE TABLE w (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	started, first := make(chan struct{}), make(chan error, 1)
	go func() {
		first <- db.InTxForTest(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO w VALUES (1)`); err != nil {
				return err
			}
			close(started)
			time.Sleep(5500 * time.Millisecond)
			return nil
		})
	}()
	<-started

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = db.InTxForTest(short, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(short, `INSERT INTO w VALUES (3)`)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the other writers") {
		t.Fatalf("a writer whose context ended while it waited: %v", err)
	}

	long, cancelLong := context.WithTimeout(ctx, time.Minute)
	defer cancelLong()
	if err := db.InTxForTest(long, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(long, `INSERT INTO w VALUES (2)`)
		return err
	}); err != nil {
		t.Fatalf("the second writer, queued behind a 5.5 s transaction: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first writer: %v", err)
	}
	var got string
	if err := db.RawSQL().QueryRowContext(ctx, `SELECT group_concat(n, ',') FROM (SELECT n FROM w ORDER BY rowid)`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "1,2" {
		t.Fatalf("rows written = %q, want the first writer's then the second's (1,2), and nothing of the one that gave up", got)
	}
}
