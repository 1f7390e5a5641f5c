package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// apiUse is one API request's use of a personal token (id, by) or of a
// machine identity (id 0; issuer, subject), waiting in useQueue for its
// transaction; err, and a machine's user record, are its outcome, set
// before done closes.
type apiUse struct {
	id              int64
	by              workflow.Actor
	issuer, subject string
	what            string
	from            string
	at              time.Time

	user     User // a machine's user record
	err      error
	done     chan struct{}
	batchLen int // how many uses shared its transaction (tests)
}

// useQueue is the group commit of the API's uses (RecordTokenUse,
// RecordMachineUse): every API request records one. A use joins the queue; when
// no flush is running, one starts (its own goroutine, so that no request
// waits for more than the transaction it joined and the one before it)
// and commits everything queued in one transaction, then the next batch,
// until the queue is empty. While one transaction commits, the uses that
// arrive gather for the next, which starts no sooner than useGap after
// the one before started, whether the same flush runs it or a new one
// (a flush that finds the queue empty after a batch ends; the next use
// starts another): under load a transaction carries as many uses as
// arrived meanwhile, and alone a use (the last batch started useGap ago
// or more) is committed at once.
//
// Without the gap, under load the batches ran back to back, each a few
// uses, and their commits (each writes the audit table's and its indexes'
// pages to the WAL) were most of an API read's cost once its answer was
// cached (make bench, issue 33). Until the gap also held across flushes,
// a flush that found the queue empty ended, and the next use's flush
// started at once: 64 clients' uses went in batches of about 6, each use
// taking 50 µs of CPU, against about 55 and 22 µs with it (the gap 2 ms;
// measured on SQLite in one process, 64 goroutines recording 25,600 uses).
type useQueue struct {
	mu       sync.Mutex
	pending  []*apiUse
	flushing bool
	started  time.Time     // when the last batch started, under mu
	gap      time.Duration // useGap's; tests set a longer one
}

// useGap is the least time from one batch's start to the next one's, by
// engine. On SQLite, where a batch's commit is in this process, 1 ms:
// measured in one run against 2 ms (bench/pages -bin-small, the API's
// list, 2026-12-07, with walRestartHeader's fix), 11,127 against 10,542
// req/s (0.477x and 0.452x of bare echo's 23,303); 0.460x against
// 0.417x alone the day before. 500 µs did no better (one interleaved run,
// 2026-12-07: 12,661 and 13,277 against 13,091 and 13,117 req/s at 1 ms).
// On PostgreSQL a batch is six round trips to the server whatever its
// size, and larger batches served it better: 2 ms (make bench at 2b0bf81,
// with 1 ms for both: 0.235x against 0.297x the table before).
func useGap(postgres bool) time.Duration {
	if postgres {
		return 2 * time.Millisecond
	}
	return time.Millisecond
}

// gapOr is q.gap, or useGap for the engine when it is not set. Called
// with mu held or from the one running flush (gap is set before any use).
func (q *useQueue) gapOr(postgres bool) time.Duration {
	if q.gap > 0 {
		return q.gap
	}
	return useGap(postgres)
}

// maxUsesPerTx bounds one transaction's uses (its audit INSERTs are split
// at rowsPerInsert anyway); a longer queue takes several.
const maxUsesPerTx = 1000

// record queues u and waits for its outcome or for ctx to end.
func (q *useQueue) record(ctx context.Context, d *DB, u *apiUse) error {
	u.done = make(chan struct{})
	q.mu.Lock()
	q.pending = append(q.pending, u)
	start := !q.flushing
	q.flushing = true
	q.mu.Unlock()
	if start {
		go q.flush(d)
	}
	select {
	case <-u.done:
		return u.err
	case <-ctx.Done():
		return fmt.Errorf("store: API use: %w", ctx.Err())
	}
}

// flush commits the queue's batches until it finds it empty. The
// transactions run on their own context: they serve many requests, and one
// request that gives up must not roll back the others' uses.
func (q *useQueue) flush(d *DB) {
	q.mu.Lock()
	wait := q.gapOr(d.dialect.postgres) - time.Since(q.started)
	q.mu.Unlock()
	time.Sleep(wait) // returns at once when not positive
	for {
		q.mu.Lock()
		n := min(len(q.pending), maxUsesPerTx)
		if n == 0 {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		if len(q.pending) == 0 {
			q.pending = nil
		}
		started := time.Now()
		q.started = started
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		write := d.inTx
		if !slices.ContainsFunc(batch, func(u *apiUse) bool { return u.id == 0 }) {
			// Personal tokens' uses only: ContentVersion stays.
			// A machine's use upserts its user record, which
			// authorization reads.
			write = d.inUsesTx
		}
		err := write(ctx, func(tx *sql.Tx) error { return recordUses(ctx, tx, d.dialect, batch) })
		cancel()
		for _, u := range batch {
			if err != nil {
				u.err = err
			}
			u.batchLen = n
			close(u.done)
		}
		q.mu.Lock()
		more := len(q.pending) > 0
		if !more {
			q.flushing = false
		}
		q.mu.Unlock()
		if !more {
			return
		}
		time.Sleep(q.gapOr(d.dialect.postgres) - time.Since(started)) // returns at once when not positive
	}
}

// recordUses records batch in tx. A machine's user record is upserted once
// per machine in the batch. A token's row is updated once per token (its
// last use is the batch's latest), which finds the token in force or
// refuses every use of it in the batch (ErrTokenRevoked). Then one
// token.use or machine.use event per recorded use, in the order they
// arrived.
func recordUses(ctx context.Context, tx *sql.Tx, dia dialect, batch []*apiUse) error {
	last := map[int64]*apiUse{}
	machines := map[[2]string]User{}
	var order []int64
	for _, u := range batch {
		if u.id == 0 {
			key := [2]string{u.issuer, u.subject}
			usr, ok := machines[key]
			if !ok {
				var err error
				if usr, err = upsertMachine(ctx, tx, u); err != nil {
					return err
				}
				machines[key] = usr
			}
			u.user = usr
			continue
		}
		if p, ok := last[u.id]; !ok {
			order = append(order, u.id)
			last[u.id] = u
		} else if !u.at.Before(p.at) {
			last[u.id] = u
		}
	}
	revoked := map[int64]bool{}
	for _, id := range order {
		u := last[id]
		res, err := tx.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = ?, last_used_from = ? WHERE id = ? AND revoked_at = ''`, fmtTime(u.at), u.from, id)
		if err != nil {
			return fmt.Errorf("store: token %d use: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: token %d use: %w", id, err)
		}
		revoked[id] = n == 0
	}
	events := make([]AuditEvent, 0, len(batch))
	for _, u := range batch {
		switch {
		case u.id == 0:
			events = append(events, AuditEvent{At: u.at, ActorID: u.user.ID, Actor: u.subject, Action: "machine.use",
				ObjectType: "machine", ObjectID: u.user.ID, Reason: u.what})
		case revoked[u.id]:
			u.err = ErrTokenRevoked
		default:
			events = append(events, AuditEvent{At: u.at, ActorID: u.by.ID, Actor: u.by.Email, Action: "token.use",
				ObjectType: "token", ObjectID: u.id, Reason: u.what})
		}
	}
	return appendAudits(ctx, tx, dia, events)
}
