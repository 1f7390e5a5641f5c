package store

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TestUseCommitsWaitForTheBatch: while a batch of uses commits, a version
// that is neither mapped nor the batch's first waits for the batch to end
// and then stands for what the batch mapped it to (it is the batch's own
// commit, read before the batch could map it); the batch's first version
// and any version while no batch commits never wait; a failed batch maps
// nothing; an old mapping is dropped, never wrong.
func TestUseCommitsWaitForTheBatch(t *testing.T) {
	var u useCommits
	ctx := t.Context()
	if got := u.content(ctx, "v1"); got != "v1" {
		t.Fatalf("no batch: %q", got)
	}
	u.begin("v1")
	if got := u.content(ctx, "v1"); got != "v1" {
		t.Errorf("the batch's first version: %q", got)
	}
	got := make(chan string)
	go func() { got <- u.content(ctx, "v2") }()
	select {
	case g := <-got:
		t.Fatalf("the batch's commit was answered %q before the batch ended", g)
	case <-time.After(50 * time.Millisecond):
	}
	u.end("v2", "")
	if g := <-got; g != "v1" {
		t.Errorf("the batch's commit, read before the batch ended, stands for %q, want v1", g)
	}
	// A second batch from v2 (which stands for v1) maps v3 to v1 too; a
	// failed one maps nothing.
	u.begin("v2")
	u.end("v3", "")
	u.begin("v3")
	u.end("", "")
	for raw, want := range map[string]string{"v2": "v1", "v3": "v1", "v4": "v4"} {
		if g := u.content(ctx, raw); g != want {
			t.Errorf("%s stands for %q, want %q", raw, g, want)
		}
	}
	// A reader whose context ends stops waiting and keeps its version.
	u.begin("v3")
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if g := u.content(short, "v5"); g != "v5" {
		t.Errorf("a reader that gave up: %q", g)
	}
	u.end("v5", "")
	for i := range useCommitsKept + 1 {
		u.begin("v1")
		u.end("x"+string(rune('a'+i%26))+string(rune('a'+i/26)), "")
	}
	if g := u.content(ctx, "v2"); g != "v2" || len(u.to) != useCommitsKept {
		t.Errorf("after %d more batches the oldest mapping is %q and %d are kept, want it dropped and %d kept", useCommitsKept+1, g, len(u.to), useCommitsKept)
	}
}

// TestUseCommitsMapTheWALRestart: a batch whose commit restarted the WAL
// maps the header the restart wrote (read while the batch committed) to
// the version the batch began from, as it maps its commit.
func TestUseCommitsMapTheWALRestart(t *testing.T) {
	var u useCommits
	ctx := t.Context()
	u.begin("v1")
	got := make(chan string)
	go func() { got <- u.content(ctx, "restart") }()
	u.end("v2", "restart")
	if g := <-got; g != "v1" {
		t.Errorf("the restart's header, read while the batch committed, stands for %q, want v1", g)
	}
	for raw, want := range map[string]string{"restart": "v1", "v2": "v1"} {
		if g := u.content(ctx, raw); g != want {
			t.Errorf("%s stands for %q, want %q", raw, g, want)
		}
	}
}

// TestWALRestartHeaderIsSQLites: walRestartHeader finds the header SQLite
// writes when a commit restarts the WAL. The restart happens at a
// transaction's first WAL frame, and a transaction larger than its page
// cache writes frames before its commit (the pager spills), so the header
// is read here between the two: after a checkpoint of the whole WAL, with
// a transaction of more pages than its cache holds still open. Then a
// commit that does not restart the WAL has none.
func TestWALRestartHeaderIsSQLites(t *testing.T) {
	path := t.TempDir() + "/restart.db"
	conn, err := newSQLiteConnector("file:" + path + "?_pragma=journal_mode(WAL)&_pragma=cache_size(10)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE t (b BLOB)`)
	exec(`INSERT INTO t VALUES (randomblob(100))`)
	shm := openShmHeader(path + "-shm")
	if shm == nil {
		t.Fatal("no WAL index")
	}
	defer shm.close()
	read := func(what string) [walIndexHeaderSize]byte {
		t.Helper()
		h, ok := shm.read()
		if !ok {
			t.Fatalf("%s: the header does not read consistently", what)
		}
		return h
	}
	var frames, backfilled int
	if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(new(int), &frames, &backfilled); err != nil || frames == 0 || backfilled != frames {
		t.Fatalf("checkpoint: %v, %d of %d frames backfilled", err, backfilled, frames)
	}
	before := read("before")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO t SELECT randomblob(3000) FROM generate_series(1, 200)`); err != nil {
		// generate_series may be missing: a recursive CTE instead.
		if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200) INSERT INTO t SELECT randomblob(3000) FROM n`); err != nil {
			t.Fatal(err)
		}
	}
	during := read("during the transaction")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	after := read("after")
	if walMxFrame(during) != 0 || walIChange(during) != walIChange(before) || walIChange(after) != walIChange(before)+1 {
		t.Fatalf("no restart seen: iChange %d, %d, %d; mxFrame during %d", walIChange(before), walIChange(during), walIChange(after), walMxFrame(during))
	}
	want, ok := walRestartHeader(before, after)
	if !ok || want != during {
		t.Errorf("walRestartHeader: %v\n% x\nSQLite wrote\n% x", ok, want, during)
	}
	exec(`INSERT INTO t VALUES (randomblob(100))`)
	if h, ok := walRestartHeader(after, read("after a commit that did not restart the WAL")); ok {
		t.Errorf("a commit that did not restart the WAL: walRestartHeader found % x", h)
	}
}
