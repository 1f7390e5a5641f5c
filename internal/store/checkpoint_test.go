package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// walState is the WAL's length and how much of it is in the database file,
// read from the -shm file as the checkpointer reads them.
func walState(t *testing.T, path string) (mx, backfilled uint32) {
	t.Helper()
	h := openShmHeader(path + "-shm")
	if h == nil {
		t.Fatal("the -shm file was not mapped")
	}
	defer h.close()
	for range 100 {
		if hdr, ok := h.read(); ok {
			return walMxFrame(hdr), h.nBackfill()
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the WAL-index header never read consistently")
	return 0, 0
}

// writeFrames commits n transactions of about 4 pages each to a scratch
// table.
func writeFrames(t *testing.T, d *DB, n int) {
	t.Helper()
	ctx := context.Background()
	blob := make([]byte, 14000)
	for i := range n {
		blob[0] = byte(i)
		if _, err := d.sql.ExecContext(ctx, `INSERT INTO ckpt_scratch (b) VALUES (?)`, blob); err != nil {
			t.Fatal(err)
		}
	}
}

func openCheckpointDB(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ckpt.db")
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.sql.Exec(`CREATE TABLE ckpt_scratch (id INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	return d, path
}

// TestCheckpointsRunBesideTheWriters: a writer's commit checkpoints only
// as a backstop, at walBackstopFrames (every pooled connection's
// wal_autocheckpoint); the checkpointer copies the WAL into the database
// file whenever checkpointFrames frames wait, and not before.
func TestCheckpointsRunBesideTheWriters(t *testing.T) {
	d, path := openCheckpointDB(t)
	if d.ckpt == nil {
		t.Fatal("a file database has no checkpointer")
	}
	ctx := context.Background()
	conns := make([]interface{ Close() error }, 0, 3)
	for range 3 { // three connections of the pool, each with its pragmas
		c, err := d.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := c.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != walBackstopFrames {
			t.Errorf("a connection's wal_autocheckpoint is %d, want the backstop %d", n, walBackstopFrames)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}

	writeFrames(t, d, 400) // about 1,600 frames
	mx, _ := walState(t, path)
	if mx < checkpointFrames {
		t.Fatalf("the WAL holds %d frames, want at least %d for this test", mx, checkpointFrames)
	}
	// The checkpointer catches up: fewer than checkpointFrames frames left
	// to copy (a checkpoint during the writes may leave a tail that small,
	// which waits for more).
	deadline := time.Now().Add(10 * time.Second)
	for {
		mx, done := walState(t, path)
		if mx-done < checkpointFrames && d.ckpt.runs.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the writes, %d of the WAL's %d frames are in the database file (checkpoints run: %d)", done, mx, d.ckpt.runs.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Fewer frames than checkpointFrames wait: no checkpoint for them.
	runs := d.ckpt.runs.Load()
	mx, done := walState(t, path)
	if n := (checkpointFrames - int(mx-done) - 100) / 5; n > 0 {
		writeFrames(t, d, n) // at most 5 frames each
	}
	time.Sleep(5 * checkpointEvery)
	if got := d.ckpt.runs.Load(); got != runs {
		mx2, done2 := walState(t, path)
		t.Errorf("%d checkpoints for fewer than %d frames waiting (%d then, %d now)", got-runs, checkpointFrames, mx-done, mx2-done2)
	}
}

// TestWALStaysBoundedUnderWrites: writers that never pause leave the
// checkpointer no moment at which the WAL is whole in the database file,
// so the WAL would not start over; the backstop in the commit path makes
// it start over once it reaches walBackstopFrames, give or take the
// frames committed while a checkpoint of the checkpointer's runs (the
// backstop's, PASSIVE too, gives up while it does, and the next commit's
// tries again: up to 2,800 frames here beside the package's other tests,
// whose commits are far quicker than a server's), so the -wal file stays
// about that long; without the backstop it held every frame written.
func TestWALStaysBoundedUnderWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 115 MiB")
	}
	d, path := openCheckpointDB(t)
	writeFrames(t, d, 7000) // about 28,000 frames
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	const frame = 24 + 4096 // a frame's header and page
	if most := int64(32 + 2*walBackstopFrames*frame); fi.Size() > most {
		t.Errorf("the -wal file is %d bytes; the backstop at %d frames should keep it under %d", fi.Size(), walBackstopFrames, most)
	}
}

// TestCheckpointerStopsWithTheHandle: Close stops it (and waits for it), so
// no checkpoint runs on a closed pool.
func TestCheckpointerStopsWithTheHandle(t *testing.T) {
	d, _ := openCheckpointDB(t)
	c := d.ckpt
	if c == nil {
		t.Fatal("a file database has no checkpointer")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Error("the checkpointer still runs after Close")
	}
	mem, err := Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if mem.ckpt != nil {
		t.Error("an in-memory database has a checkpointer")
	}
}
