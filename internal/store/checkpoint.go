package store

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// SQLite's checkpoints run beside the writers, not in their commits.
//
// In WAL mode a commit appends its pages to the -wal file; a checkpoint
// copies them back into the database file. By default the connection
// whose commit takes the WAL past 1,000 frames runs that checkpoint at the
// end of its COMMIT, and with synchronous=NORMAL a checkpoint syncs the
// WAL before it copies and the database file after ("the WAL file is
// synchronized before each checkpoint and the database file is
// synchronized after each completed checkpoint",
// https://sqlite.org/pragma.html#pragma_synchronous). The writer waits for
// both fsyncs, and every transaction queued behind it waits too. Under the
// API's load in make bench (issue 33: GET /api/v1/connections on SQLite,
// each request's use a commit) that was about 15 checkpoints a second,
// their fsyncs 1.8 ms at the median and 7.3 ms at the 90th percentile
// (strace -T of the portal, 2026-12-07, 366 fsyncs in about 12 s of
// load): the uses' transactions stood still about a tenth of the time,
// and with them the requests waiting for their use to commit. The fsyncs
// flush what the WAL and the database file hold that the disk does not,
// so fewer, larger checkpoints in the commit path cost as much: at 10,000
// frames every checkpoint stalled all 64 clients for 70-87 ms, once a
// second (one run of bench/pages, the same day).
//
// So a checkpointer goroutine per database handle watches the WAL's length
// in the WAL-index (the -shm file, mapped as DataVersion maps it) and
// runs a PASSIVE checkpoint on a pooled connection whenever at least
// checkpointFrames frames are in the WAL and not yet in the database
// file: PASSIVE takes the checkpoint lock only, never the write lock, so
// writers go on committing while it copies and syncs
// (https://sqlite.org/c3ref/wal_checkpoint_v2.html). A WAL starts over from
// its beginning only when a writer finds it checkpointed whole, which a
// checkpoint racing writers seldom leaves; so the connections keep
// SQLite's own checkpoint in the commit path as a backstop, at
// walBackstopFrames (wal_autocheckpoint): when the WAL reaches that length
// the committing writer checkpoints what the checkpointer has not copied
// yet (the checkpointer stops copying checkpointFrames before it, so that
// the two seldom meet; when they do, the backstop's PASSIVE checkpoint
// gives up and the next commit's tries again) and the next writer
// restarts the WAL, which bounds the -wal file at about
// walBackstopFrames pages (40 MiB at 4 KiB pages). Under the API's load
// that is a stall in the commit path every 10,000 frames instead of every
// 1,000.
// Several processes on one file each run a checkpointer; a PASSIVE
// checkpoint that finds another running returns at once.
const (
	checkpointFrames  = 1000  // SQLite's default wal_autocheckpoint
	walBackstopFrames = 10000 // the connections' wal_autocheckpoint
	checkpointEvery   = 50 * time.Millisecond
)

// walCheckpointsInfoNBackfill is the offset in the -shm file of the
// checkpoint information's nBackfill, the number of WAL frames already
// copied into the database file: after the WAL-index header's two 48-byte
// copies (https://sqlite.org/walformat.html#the_wal_index_file_format).
const walCheckpointsInfoNBackfill = 2 * walIndexHeaderSize

// checkpointer runs the checkpoints of one SQLite database file.
type checkpointer struct {
	db   *sql.DB
	path string // the database file
	stop chan struct{}
	done chan struct{}
	once sync.Once

	runs atomic.Int64 // checkpoints started (tests)
}

// startCheckpointer starts the checkpointer of the database file at path,
// whose connections db pools.
func startCheckpointer(db *sql.DB, path string) *checkpointer {
	c := &checkpointer{db: db, path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	var shm *shmHeader
	defer func() {
		if shm != nil {
			shm.close()
		}
	}()
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		if shm == nil {
			// The -shm file exists once a connection has opened the
			// database in WAL mode; until then there is nothing to do.
			if shm = openShmHeader(c.path + "-shm"); shm == nil {
				continue
			}
		}
		h, ok := shm.read()
		if !ok {
			if !shm.current() {
				shm.close()
				shm = nil
			}
			continue // being written: the next tick reads it
		}
		mx := walMxFrame(h)
		if mx-min(mx, shm.nBackfill()) < checkpointFrames || mx >= walBackstopFrames-checkpointFrames {
			// Too little to copy, or the WAL is about to reach the
			// backstop, whose checkpoint must not find this one
			// running (it would give up, and the WAL grow on until a
			// later commit's).
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		// Its row (busy, frames, copied) is not needed: the next tick
		// reads the -shm file again. Errors are ignored as SQLite's own
		// autocheckpoint's are: the next tick (or the backstop) tries
		// again.
		_, _ = c.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		cancel()
		c.runs.Add(1)
	}
}

// close stops the checkpointer and waits for its checkpoint, if one runs.
func (c *checkpointer) close() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// nBackfill is the checkpoint information's count of WAL frames copied
// into the database file (a checkpoint writes it; read atomically, as
// the header's words are).
func (h *shmHeader) nBackfill() uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&h.mem[walCheckpointsInfoNBackfill])))
}
