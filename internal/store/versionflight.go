package store

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// versionFlights shares PostgreSQL's data-version reads among concurrent
// requests without making any of them older: a request joins a read that
// has not started yet, never one already on its way (issue 15: one round
// trip per page view was half of a cached page's cost on PostgreSQL). A
// read that starts after a request arrived sees every transaction
// committed before it arrived, exactly as the request's own read would,
// so DataVersion's rule (read the version before the data kept under it)
// holds for every joiner. At most one read runs and one waits; the
// waiting one starts when the running one ends and gap has passed.
//
// gap is the least time from one read's start to the next one's: the
// waiting read starts no sooner, and every caller that arrives meanwhile
// joins it (it has not started). Under load the reads ran back to back,
// each shared by a handful of requests, and the reads themselves were a
// tenth of a cached page's cost in the portal and more in PostgreSQL
// (make bench, issue 33); with a gap a request waits at most gap longer
// and one read serves more of them. A caller alone waits for nothing
// (the last read started longer than gap ago).
type versionFlights struct {
	query func(context.Context) (string, error)
	gap   time.Duration

	mu      sync.Mutex
	running bool
	next    *versionFlight // waiting to start; joined by every new caller
	started time.Time      // when the last read started

	reads, calls int64 // reads sent and calls made (for tests), under mu
}

type versionFlight struct {
	done  chan struct{}
	token string
	err   error
}

// versionReadTimeout bounds a shared read: it runs for several requests,
// so no one request's context may cut it short.
const versionReadTimeout = 10 * time.Second

func (f *versionFlights) read(ctx context.Context) (string, error) {
	f.mu.Lock()
	f.calls++
	fl := f.next
	if fl == nil {
		fl = &versionFlight{done: make(chan struct{})}
		f.next = fl
		if !f.running {
			f.start()
		}
	}
	f.mu.Unlock()
	select {
	case <-fl.done:
		return fl.token, fl.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start runs the waiting flight, once gap has passed since the last read
// started (callers join it until then), and then the one that waits by
// then, if any. Called with mu held.
func (f *versionFlights) start() {
	f.running = true
	wait := f.gap - time.Since(f.started)
	go func() {
		if wait > 0 {
			time.Sleep(wait)
		}
		f.mu.Lock()
		fl := f.next
		f.next = nil
		f.reads++
		f.started = time.Now()
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), versionReadTimeout)
		fl.token, fl.err = f.query(ctx)
		cancel()
		close(fl.done)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.running = false
		if f.next != nil {
			f.start()
		}
	}()
}

// pgVersionState is a PostgreSQL version's state function and its tokens'
// prefix.
type pgVersionState struct{ function, prefix string }

var (
	// pgFullVersion is DataVersion's: every commit moves it.
	pgFullVersion = pgVersionState{"portal_data_version_state", "pg:"}
	// pgContentVersion is ContentVersion's: a transaction of API uses
	// only does not move it (migrations/00041_content_version.sql).
	pgContentVersion = pgVersionState{"portal_content_version_state", "pgc:"}
)

// pgVersionGap is PostgreSQL's versionFlights gap.
const pgVersionGap = 250 * time.Microsecond

// pgVersionWaits are the pauses between PostgreSQL data-version reads
// while another session's write is in progress and has counted a write
// (portal_data_version_state(): busy, and a version past the last clean
// one), 15 ms in all. Such a write is nearly always short (a notice
// delivered, a job's step; before migrations/00040 a session's expiry
// refresh too), and a request that gives up caches
// nothing: it renders its page from the database, and so does every other
// request of that moment (make bench, issue 33: each of the last p99
// stalls of pages/postgres/dashboard coincided with one session write
// holding its lock, and 64 requests rendering at once). Waiting for the
// write to end keeps them on the cached page of the version it makes.
var pgVersionWaits = []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond}

// pgDataVersion reads state, portal_data_version_state()
// (migrations/00036_data_version_state.sql, 00040_data_version_lock.sql,
// 00041_content_version.sql) or portal_content_version_state() (00041):
// the version, and whether another session's transaction has counted a
// write and not ended (it holds the data-version advisory lock). With none
// open the version is returned and remembered as the last clean one. With
// one open, the version is still returned when it equals the last clean
// one: every write it counted had ended when it was read, and the holder
// has counted nothing since, so the committed data are that version's (a
// long statement of a background loop no longer turns every page view of
// its duration into an uncached render). A version past it is read again
// after each of waits; "" if the write is still open then (nothing is
// cached). The token returned is prefix and the version. (Before 00040 a
// transaction counted as open from its first write lock, read from
// pg_locks, whose copy of the server's lock table made each read twice a
// SELECT 1's time.)
func pgDataVersion(db *sql.DB, state pgVersionState, waits []time.Duration) func(context.Context) (string, error) {
	var clean atomic.Pointer[string] // the last version read with no counted write open (not busy)
	q, prefix := `SELECT version, busy FROM `+state.function+`()`, state.prefix
	return func(ctx context.Context) (string, error) {
		for i := 0; ; i++ {
			var version string
			var busy bool
			if err := db.QueryRowContext(ctx, q).Scan(&version, &busy); err != nil {
				return "", err
			}
			// The token carries its engine's prefix, made once per
			// read for every request that shares it.
			if !busy {
				clean.Store(&version)
				return prefix + version, nil
			}
			if c := clean.Load(); c != nil && *c == version {
				return prefix + version, nil
			}
			if i == len(waits) {
				return "", nil
			}
			t := time.NewTimer(waits[i])
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			}
		}
	}
}
