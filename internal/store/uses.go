package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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

	// served: a read's use, queued after its answer was decided
	// (QueueTokenUse): recorded even when a revocation committed
	// meanwhile, since the read was answered.
	served bool

	user     User // a machine's user record
	err      error
	done     chan struct{}
	batchLen int // how many uses shared its transaction (tests)
}

// useQueue is the group commit of the API's uses (RecordTokenUse, QueueTokenUse,
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
//
// A read's use does not wait for its transaction (queue): the read is
// answered, and its use committed with the next batch, a few milliseconds
// later. Readers of what uses write wait for the uses queued before them
// (settle), so that in this process the audit trail and a token's last
// use show every use already answered; Close commits what is queued.
type useQueue struct {
	mu       sync.Mutex
	pending  []*apiUse
	flushing bool
	last     *apiUse       // the use queued last: its batch commits after every earlier one's
	lost     atomic.Int64  // reads' uses whose transaction failed
	started  time.Time     // when the last batch started, under mu
	gap      time.Duration // useGap's; tests set a longer one
	open     int           // uses queued and without an outcome yet, under mu
	closing  chan struct{} // closed by close: the flush stops keeping the gap (made by the first to need it)
	closed   bool          // closing is closed
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

// maxQueuedUses bounds the reads' uses waiting for a transaction: a read
// that finds this many queued before it waits for its own to commit, as a
// write's use does, so that a database slower than the requests holds the
// requests back rather than a growing queue (and a crash loses at most
// this many reads' uses).
const maxQueuedUses = maxUsesPerTx

// record queues u and waits for its outcome or for ctx to end.
func (q *useQueue) record(ctx context.Context, d *DB, u *apiUse) error {
	q.add(d, u)
	return q.wait(ctx, u)
}

// queue queues a read's use (u.served) and returns at once, unless
// maxQueuedUses or more were already waiting: then it waits for u's
// transaction as record does. A queued use whose transaction fails is
// lost (Close and settle still return), as the Kubernetes API server's
// batch audit backend loses what it buffered.
func (q *useQueue) queue(ctx context.Context, d *DB, u *apiUse) error {
	if q.add(d, u) < maxQueuedUses {
		return nil
	}
	return q.wait(ctx, u)
}

// add queues u, starts a flush when none runs, and says how many uses
// were waiting for their outcome before u (queued, or in a transaction).
func (q *useQueue) add(d *DB, u *apiUse) int {
	u.done = make(chan struct{})
	q.mu.Lock()
	n := q.open
	q.open++
	q.pending = append(q.pending, u)
	q.last = u
	start := !q.flushing
	q.flushing = true
	q.mu.Unlock()
	if start {
		go q.flush(d)
	}
	return n
}

// settle waits until every use queued before the call has its outcome
// (committed, refused or lost), or ctx ends.
func (q *useQueue) settle(ctx context.Context) error {
	q.mu.Lock()
	last := q.last
	q.mu.Unlock()
	if last == nil {
		return nil
	}
	select {
	case <-last.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: API uses: %w", ctx.Err())
	}
}

// close commits what is queued without keeping the gap, and waits for it
// (DB.Close). Uses queued afterwards are still committed, at once.
func (q *useQueue) close() {
	q.mu.Lock()
	if !q.closed {
		close(q.closingLocked())
		q.closed = true
	}
	q.mu.Unlock()
	_ = q.settle(context.Background())
}

// closingLocked is q.closing, made when first needed. Called with mu held.
func (q *useQueue) closingLocked() chan struct{} {
	if q.closing == nil {
		q.closing = make(chan struct{})
	}
	return q.closing
}

// pause waits d (none when not positive), or until close is called.
func (q *useQueue) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	q.mu.Lock()
	closing := q.closingLocked() // a pause that began before close ends with it too
	q.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-closing:
	}
}

// wait waits for u's outcome or for ctx to end.
func (q *useQueue) wait(ctx context.Context, u *apiUse) error {
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
	q.pause(wait)
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
		// The queue's state first, then the outcomes: a caller that
		// sees its use's outcome finds the flush ended when nothing
		// else was queued (TestTokenUsesKeepTheGapAcrossFlushes; closed
		// first, the flush could still be running when it looked).
		q.mu.Lock()
		q.open -= n
		more := len(q.pending) > 0
		if !more {
			q.flushing = false
		}
		q.mu.Unlock()
		for _, u := range batch {
			if err != nil {
				u.err = err
				if u.served {
					q.lost.Add(1)
				}
			}
			u.batchLen = n
			close(u.done)
		}
		if !more {
			return
		}
		q.pause(q.gapOr(d.dialect.postgres) - time.Since(started))
	}
}

// recordUses records batch in tx. A machine's user record is upserted once
// per machine in the batch. A token's row is updated once per token (its
// last use is the batch's latest), which finds the token in force or
// refuses every use of it in the batch (ErrTokenRevoked) but the reads
// already answered (served), whose events are still recorded. Then one
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
		case revoked[u.id] && !u.served:
			u.err = ErrTokenRevoked
		default:
			events = append(events, AuditEvent{At: u.at, ActorID: u.by.ID, Actor: u.by.Email, Action: "token.use",
				ObjectType: "token", ObjectID: u.id, Reason: u.what})
		}
	}
	return appendAudits(ctx, tx, dia, events)
}
