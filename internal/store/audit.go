package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// AuditEvent is one row of the append-only, hash-chained audit trail.
type AuditEvent struct {
	ID         int64
	At         time.Time
	ActorID    int64
	Actor      string
	Action     string
	ObjectType string
	ObjectID   int64
	Team       string
	Version    int
	Reason     string
	PrevHash   string
	Hash       string
}

// genesisHash is the prev_hash of the first event.
const genesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// chainHash is SHA-256 over the previous hash and every field, each
// length-prefixed so that no two different events can serialize alike:
// "len:field|" for each, the length in decimal bytes. Built in one buffer
// (every API request appends one event: the fmt.Fprintf a field it was
// before cost a few µs an event); TestChainHashBytes pins the bytes to
// that format.
func chainHash(prev string, e AuditEvent) string {
	var buf [512]byte
	b := buf[:0]
	var num [20]byte
	number := func(n int64) []byte { return strconv.AppendInt(num[:0], n, 10) }
	b = appendField(b, prev)
	b = appendField(b, fmtTime(e.At))
	b = appendField(b, number(e.ActorID))
	b = appendField(b, e.Actor)
	b = appendField(b, e.Action)
	b = appendField(b, e.ObjectType)
	b = appendField(b, number(e.ObjectID))
	b = appendField(b, e.Team)
	b = appendField(b, number(int64(e.Version)))
	b = appendField(b, e.Reason)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendField appends f to b as chainHash hashes a field: "len:f|".
func appendField[T string | []byte](b []byte, f T) []byte {
	b = append(strconv.AppendInt(b, int64(len(f)), 10), ':')
	return append(append(b, f...), '|')
}

// appendAudit adds an event inside the caller's transaction, chained to the
// last one. Write transactions are BEGIN IMMEDIATE, so appends serialize.
func appendAudit(ctx context.Context, tx *sql.Tx, e AuditEvent) error {
	return appendAudits(ctx, tx, dialect{}, []AuditEvent{e}) // one row: the same statement on either engine
}

// auditInsert is the audit trail's INSERT up to its rows;
// sqliteAuditInsertOrRollback the same, for SQLite's statements of
// several rows (appendAudits says why).
const (
	auditColumns                = `audit_events (at, actor_id, actor, action, object_type, object_id, team, version, reason, prev_hash, hash) VALUES `
	auditInsert                 = `INSERT INTO ` + auditColumns
	sqliteAuditInsertOrRollback = `INSERT OR ROLLBACK INTO ` + auditColumns
)

// sqliteAuditRowsPerInsert is how many events one SQLite statement of
// appendAudits inserts: 55 parameters, under stmtCacheBigArgs, so that every
// statement's text (1 to 5 rows) stays prepared on its connection. With
// one statement for all of them, each batch of API uses (a few to a few
// dozen) had its own text, prepared again every time (a tenth of a use's
// cost in make bench's profile, issue 33).
const sqliteAuditRowsPerInsert = 5

// appendAudits adds events, in order, inside the caller's transaction, each
// chained to the one before and the first to the last one stored: one read
// of the last hash, and the rows in multi-row INSERTs (insertRows; a
// re-apply batch's completions append one event per job, and every batch
// of API uses one per use).
//
// On SQLite (d not PostgreSQL) a statement of several rows is INSERT OR
// ROLLBACK: "When an applicable constraint violation occurs, the ROLLBACK
// resolution algorithm aborts the current SQL statement with an
// SQLITE_CONSTRAINT error and rolls back the current transaction"
// (https://sqlite.org/lang_conflict.html). Any error here fails the whole
// transaction anyway (its caller rolls back), and a statement that cannot
// end half done needs no statement journal: under the default (ABORT) each
// multi-row INSERT inside the transaction first copied every page it
// changed to one (the profile's _subjournalPage, about a tenth of a use's
// cost; SQLite's test/stmt.test checks which statements open one).
func appendAudits(ctx context.Context, tx *sql.Tx, d dialect, events []AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	var prev string
	err := tx.QueryRowContext(ctx, `SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1`).Scan(&prev)
	if errors.Is(err, sql.ErrNoRows) {
		prev = genesisHash
	} else if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	head, per := auditInsert, rowsPerInsert
	if !d.postgres && len(events) > 1 {
		head, per = sqliteAuditInsertOrRollback, sqliteAuditRowsPerInsert
	}
	// The ids grow in the rows' order (one statement at a time, one
	// writer), so the chain reads in id order.
	if err := insertRowsBy(ctx, tx, per, len(events), head, 11, "",
		func(i int, args []any) []any {
			e := events[i]
			e.PrevHash = prev
			e.Hash = chainHash(prev, e)
			prev = e.Hash
			return append(args, fmtTime(e.At), nullID(e.ActorID), e.Actor, e.Action, e.ObjectType, e.ObjectID, e.Team, e.Version, e.Reason, e.PrevHash, e.Hash)
		}); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// AuditFilter narrows AuditEvents. Empty fields match everything.
type AuditFilter struct {
	Team       string
	ObjectType string
	ObjectID   int64
	Action     string
	// ActionPrefix matches actions starting with it, e.g. "scheduler.".
	ActionPrefix string
	Actor        string
}

// AuditEvents returns events newest first, with id < before (0: from the
// newest), at most limit.
func (d *DB) AuditEvents(ctx context.Context, f AuditFilter, before int64, limit int) ([]AuditEvent, error) {
	q, args := auditEventsQuery(f, before, limit)
	return d.auditRows(ctx, q, args...)
}

// auditRows runs a query of auditCols and scans its events in order,
// once the API reads' uses queued before it are recorded (QueueTokenUse):
// the trail shows every use already answered.
func (d *DB) auditRows(ctx context.Context, q string, args ...any) ([]AuditEvent, error) {
	if err := d.uses.settle(ctx); err != nil {
		return nil, err
	}
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit events: %w", err)
	}
	defer rows.Close()
	var out []AuditEvent
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// auditEventsQuery is AuditEvents' query. Every filter has an index that
// ends in id (migrations 00002, 00023), so a page is a walk of that index
// newest first that stops at the limit, whatever the trail's length.
func auditEventsQuery(f AuditFilter, before int64, limit int) (string, []any) {
	where, args := auditFilterWhere(f)
	if before > 0 {
		where, args = append(where, "id < ?"), append(args, before)
	}
	q := `SELECT ` + auditCols + ` FROM audit_events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	return q, args
}

// AuditEventsAfter returns events matching f with after < id <= upto,
// oldest first, at most limit: the same filters as AuditEvents, walked the
// other way (a reader catching up from its last event).
func (d *DB) AuditEventsAfter(ctx context.Context, f AuditFilter, after, upto int64, limit int) ([]AuditEvent, error) {
	where, args := auditFilterWhere(f)
	where, args = append(where, "id > ?", "id <= ?"), append(args, after, upto)
	return d.auditRows(ctx, `SELECT `+auditCols+` FROM audit_events WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, append(args, limit)...)
}

// EachAuditEventAfter calls fn for every event matching f with after < id
// <= upto, oldest first, in batches of a fixed size by keyset: constant
// memory, and no read transaction held while the client is slow.
func (d *DB) EachAuditEventAfter(ctx context.Context, f AuditFilter, after, upto int64, fn func(AuditEvent) error) error {
	return eachAuditBatch(after, func(after int64, n int) ([]AuditEvent, error) {
		return d.AuditEventsAfter(ctx, f, after, upto, n)
	}, fn)
}

// eachAuditBatch calls fn for every event of the batches read(key, n)
// returns, each read from the last id of the one before (keyset), until a
// batch comes back short: the loop of EachAuditEvent and
// EachAuditEventAfter.
func eachAuditBatch(key int64, read func(key int64, n int) ([]AuditEvent, error), fn func(AuditEvent) error) error {
	const batch = 500
	for {
		events, err := read(key, batch)
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(events) < batch {
			return nil
		}
		key = events[len(events)-1].ID
	}
}

// auditFilterWhere is f as SQL conditions and their arguments.
func auditFilterWhere(f AuditFilter) ([]string, []any) {
	var where []string
	var args []any
	if f.Team != "" {
		where, args = append(where, "team = ?"), append(args, f.Team)
	}
	if f.ObjectType != "" {
		where, args = append(where, "object_type = ?"), append(args, f.ObjectType)
	}
	if f.ObjectID != 0 {
		where, args = append(where, "object_id = ?"), append(args, f.ObjectID)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.ActionPrefix != "" {
		where, args = append(where, "action LIKE ? ESCAPE '\\'"), append(args, likeEscape(f.ActionPrefix)+"%")
	}
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	return where, args
}

const auditCols = `id, at, COALESCE(actor_id, 0), actor, action, object_type, object_id, team, version, reason, prev_hash, hash`

func scanAudit(rows *sql.Rows) (AuditEvent, error) {
	var e AuditEvent
	var at string
	if err := rows.Scan(&e.ID, &at, &e.ActorID, &e.Actor, &e.Action, &e.ObjectType, &e.ObjectID, &e.Team, &e.Version, &e.Reason, &e.PrevHash, &e.Hash); err != nil {
		return e, fmt.Errorf("store: audit events: %w", err)
	}
	t, err := parseTime(at)
	if err != nil {
		return e, fmt.Errorf("store: audit event %d: %w", e.ID, err)
	}
	e.At = t
	return e, nil
}

// AuditBreak names the first row where the chain does not verify.
type AuditBreak struct {
	ID     int64
	Reason string
}

// AuditCheckpoint is how far a verification got: the last verified event,
// its hash, and how many events verified up to it.
type AuditCheckpoint struct {
	ID    int64
	Hash  string
	Count int
}

// VerifyAudit walks the whole chain in id order and returns how many events
// verified and the first broken row, if any.
func (d *DB) VerifyAudit(ctx context.Context) (int, *AuditBreak, error) {
	cp, brk, err := d.VerifyAuditFrom(ctx, AuditCheckpoint{})
	return cp.Count, brk, err
}

// VerifyAuditFrom verifies only the events after a checkpoint (the zero
// checkpoint is the start of the chain) and returns the new checkpoint. A
// page that shows the chain's status can then check what was appended
// since its last look instead of re-reading the whole trail every time;
// `portal audit verify` walks it all.
func (d *DB) VerifyAuditFrom(ctx context.Context, from AuditCheckpoint) (AuditCheckpoint, *AuditBreak, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+auditCols+` FROM audit_events WHERE id > ? ORDER BY id`, from.ID)
	if err != nil {
		return from, nil, fmt.Errorf("store: verify audit: %w", err)
	}
	defer rows.Close()
	cp := from
	if cp.Hash == "" {
		cp.Hash = genesisHash
	}
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return cp, &AuditBreak{ID: e.ID, Reason: "unreadable row: " + err.Error()}, nil
		}
		if e.PrevHash != cp.Hash {
			return cp, &AuditBreak{ID: e.ID, Reason: "prev_hash does not match the previous event's hash (a row was removed or reordered)"}, nil
		}
		if want := chainHash(cp.Hash, e); e.Hash != want {
			return cp, &AuditBreak{ID: e.ID, Reason: "hash does not match the row's content (the row was altered)"}, nil
		}
		cp = AuditCheckpoint{ID: e.ID, Hash: e.Hash, Count: cp.Count + 1}
	}
	return cp, nil, rows.Err()
}

// RecordConnectionEvent appends an audit event about a connection that
// changes no state of it: e.g. an admin adopting a compute quota made
// outside the portal for its next provisioning run.
func (d *DB) RecordConnectionEvent(ctx context.Context, connID int64, action string, by workflow.Actor, reason string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		c, err := getConn(ctx, tx, connID)
		if err != nil {
			return err
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action,
			ObjectType: "connection", ObjectID: connID, Team: c.Team, Version: c.ApprovedVersion, Reason: reason})
	})
}

// RecordClusterEvent appends an audit event about the shared cluster itself
// (not a connection): e.g. reconciling its scheduler config.
func (d *DB) RecordClusterEvent(ctx context.Context, action string, by workflow.Actor, reason string, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: action, ObjectType: "cluster", Reason: reason})
	})
}

// EachAuditEvent calls fn for every event matching f with id < before (0:
// from the newest), newest first, reading batches of a fixed size by keyset,
// so an export of any length takes constant memory and never holds a read
// transaction while the client is slow. Events appended meanwhile have
// higher ids than the first batch and are not included.
func (d *DB) EachAuditEvent(ctx context.Context, f AuditFilter, before int64, fn func(AuditEvent) error) error {
	return eachAuditBatch(before, func(before int64, n int) ([]AuditEvent, error) {
		return d.AuditEvents(ctx, f, before, n)
	}, fn)
}

// AuditHead is the newest event of the chain: publishing its hash somewhere
// the database's writers cannot reach is what lets a later verification see
// that events at the end were removed, which the chain alone cannot show.
type AuditHead struct {
	Count int   // events in the trail
	ID    int64 // the newest event's id (0 for an empty trail)
	Hash  string
	At    time.Time // the newest event's time (AuditHead only; zero for an empty trail)
}

// AuditHead returns the chain's current head, read in one statement (after
// the API reads' uses queued before it, as auditRows). Hash is the genesis
// hash of an empty trail.
func (d *DB) AuditHead(ctx context.Context) (AuditHead, error) {
	h := AuditHead{Hash: genesisHash}
	if err := d.uses.settle(ctx); err != nil {
		return h, err
	}
	var at string
	err := d.sql.QueryRowContext(ctx, `SELECT id, hash, at, (SELECT COUNT(*) FROM audit_events) FROM audit_events ORDER BY id DESC LIMIT 1`).Scan(&h.ID, &h.Hash, &at, &h.Count)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("store: audit head: %w", err)
	}
	if h.At, err = parseTime(at); err != nil {
		return h, fmt.Errorf("store: audit event %d: %w", h.ID, err)
	}
	return h, nil
}

// AuditHeadAt returns the head the chain had when the event with this hash
// was the newest (its id, and the number of events up to it), or
// ErrNotFound when no event has it: the events up to that published head
// are gone.
func (d *DB) AuditHeadAt(ctx context.Context, hash string) (AuditHead, error) {
	h := AuditHead{Hash: hash}
	if hash == genesisHash {
		return h, nil
	}
	err := d.sql.QueryRowContext(ctx, `SELECT id, (SELECT COUNT(*) FROM audit_events a WHERE a.id <= e.id) FROM audit_events e WHERE hash = ? ORDER BY id LIMIT 1`, hash).Scan(&h.ID, &h.Count)
	if errors.Is(err, sql.ErrNoRows) {
		return h, ErrNotFound
	}
	if err != nil {
		return h, fmt.Errorf("store: audit head at %s: %w", hash, err)
	}
	return h, nil
}

// AuditHeadLogEvery is how many appended events apart `portal serve` logs
// the chain's head, so that a log store outside the database keeps it.
const AuditHeadLogEvery = 1000

// AuditHeadsEvery returns the heads the chain had at every multiple of
// every events after the head from (whose Count is the number of events
// up to it: AuditHead's, or one this function returned), oldest first: the
// milestones `portal serve` logs so that the log store keeps the chain's
// head. Each milestone's count is from's plus the events counted between
// them, so a call reads only the events after from: counting every event
// up to each milestone read the whole trail once per milestone, a
// 1,000,000-row count per 1,000 new events on make bench's database (10 s
// of CPU in the minute after its API run).
func (d *DB) AuditHeadsEvery(ctx context.Context, from AuditHead, every int) ([]AuditHead, error) {
	if every <= 0 {
		return nil, errors.New("store: audit heads: every must be positive")
	}
	rows, err := d.sql.QueryContext(ctx, `SELECT id, hash FROM audit_events WHERE id > ? AND id % ? = 0 ORDER BY id`, from.ID, every)
	if err != nil {
		return nil, fmt.Errorf("store: audit heads: %w", err)
	}
	var out []AuditHead
	for rows.Next() {
		var h AuditHead
		if err := rows.Scan(&h.ID, &h.Hash); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: audit heads: %w", err)
		}
		out = append(out, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit heads: %w", err)
	}
	// Events are never deleted (triggers), so an event's id is the count
	// of events up to it; the events are counted anyway: a gap shows as a
	// count that differs from the id.
	prev := from
	for i := range out {
		var n int
		if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_events WHERE id > ? AND id <= ?`, prev.ID, out[i].ID).Scan(&n); err != nil {
			return nil, fmt.Errorf("store: audit heads: %w", err)
		}
		out[i].Count = prev.Count + n
		prev = out[i]
	}
	return out, nil
}

// auditPageCheckpoint names the audit page's row in audit_checkpoint.
const auditPageCheckpoint = "audit-page"

// SharedAuditCheckpoint is how far the audit page of any replica has
// verified the chain (the zero checkpoint before any look).
func (d *DB) SharedAuditCheckpoint(ctx context.Context) (AuditCheckpoint, error) {
	var cp AuditCheckpoint
	err := d.sql.QueryRowContext(ctx, `SELECT event_id, hash, event_count FROM audit_checkpoint WHERE name = ?`, auditPageCheckpoint).
		Scan(&cp.ID, &cp.Hash, &cp.Count)
	if errors.Is(err, sql.ErrNoRows) {
		return AuditCheckpoint{}, nil
	}
	if err != nil {
		return AuditCheckpoint{}, fmt.Errorf("store: audit checkpoint: %w", err)
	}
	return cp, nil
}

// AdvanceAuditCheckpoint records cp as the shared checkpoint if it is
// further along the chain than the stored one: two replicas verifying at
// once never move it back.
func (d *DB) AdvanceAuditCheckpoint(ctx context.Context, cp AuditCheckpoint, now time.Time) error {
	if cp.ID == 0 {
		return nil
	}
	return d.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_checkpoint (name, event_id, hash, event_count, verified_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET event_id = excluded.event_id, hash = excluded.hash, event_count = excluded.event_count, verified_at = excluded.verified_at
WHERE audit_checkpoint.event_id < excluded.event_id`, auditPageCheckpoint, cp.ID, cp.Hash, cp.Count, fmtTime(now))
		if err != nil {
			return fmt.Errorf("store: advance the audit checkpoint: %w", err)
		}
		return nil
	})
}

// VerifyAuditSinceCheckpoint verifies the events appended after the shared
// checkpoint and advances it: the audit page's check, the same on every
// replica. A break is returned and the checkpoint stays before it.
func (d *DB) VerifyAuditSinceCheckpoint(ctx context.Context, now time.Time) (AuditCheckpoint, *AuditBreak, error) {
	from, err := d.SharedAuditCheckpoint(ctx)
	if err != nil {
		return from, nil, err
	}
	cp, brk, err := d.VerifyAuditFrom(ctx, from)
	if err != nil {
		return cp, nil, err
	}
	if cp.ID > from.ID {
		if err := d.AdvanceAuditCheckpoint(ctx, cp, now); err != nil {
			return cp, brk, err
		}
	}
	return cp, brk, nil
}
