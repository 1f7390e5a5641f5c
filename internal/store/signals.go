package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// SignalEvent is a signal that fired, open until acknowledged.
type SignalEvent struct {
	ID       int64
	Team     string // "" for the cluster's signals
	Signal   usage.SignalKind
	FiredAt  time.Time
	Detail   string
	Owner    string
	Response string
	// AckBy, AckAt and AckNote are set once acknowledged.
	AckBy   string
	AckAt   time.Time
	AckNote string
}

// Open reports whether nobody acknowledged it yet.
func (e SignalEvent) Open() bool { return e.AckAt.IsZero() }

// ErrAcknowledged is acknowledging an event someone already acknowledged.
var ErrAcknowledged = errors.New("store: signal already acknowledged")

// RecordFired stores a fired event for every firing status that has no
// open event of its team and signal yet, with an audit event each, and
// returns how many it stored, and leaves each one's notices
// (workflow.SignalFiredNotices: its owner is told) in the outbox:
// evaluating again while a signal stays
// firing stores nothing (the unique index on open events decides, so two
// evaluators racing cannot store it twice).
func (d *DB) RecordFired(ctx context.Context, statuses []usage.SignalStatus, now time.Time) (int, error) {
	n := 0
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, s := range statuses {
			if s.State != usage.SignalFiring {
				continue
			}
			detail := s.Current + " — " + s.Threshold
			var id int64
			err := tx.QueryRowContext(ctx, `
INSERT INTO signal_events (team, signal, fired_at, detail, owner, response) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING RETURNING id`, s.Team, string(s.Kind), fmtTime(now), detail, s.Owner, s.Response).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				continue // already fired
			}
			if err != nil {
				return fmt.Errorf("store: record signal: %w", err)
			}
			n++
			if err := appendAudit(ctx, tx, AuditEvent{At: now, Actor: "signals", Action: "signal.fired",
				ObjectType: "signal", ObjectID: id, Team: s.Team, Reason: s.Kind.Title() + ": " + detail}); err != nil {
				return err
			}
			// The one who responds hears of it, from the outbox, in the
			// transaction that records the event (once per event).
			if err := insertNotices(ctx, tx, 0, s.Team, workflow.SignalFiredNotices(s.Team, s.Kind.Title(), detail, s.Owner, s.Response), now); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// SignalFilter selects signal events. Teams scopes them (nil: every team
// and the cluster's; a team list never includes the cluster's).
type SignalFilter struct {
	Teams    []string
	OpenOnly bool
	Limit    int // default 200
}

const signalCols = `e.id, e.team, e.signal, e.fired_at, e.detail, e.owner, e.response,
	COALESCE(u.email, ''), COALESCE(e.acknowledged_at, ''), COALESCE(e.ack_note, '')`

func scanSignal(sc interface{ Scan(...any) error }) (SignalEvent, error) {
	var e SignalEvent
	var sig, fired, acked string
	if err := sc.Scan(&e.ID, &e.Team, &sig, &fired, &e.Detail, &e.Owner, &e.Response, &e.AckBy, &acked, &e.AckNote); err != nil {
		return e, err
	}
	e.Signal = usage.SignalKind(sig)
	var err error
	if e.FiredAt, err = parseTime(fired); err != nil {
		return e, err
	}
	if acked != "" {
		if e.AckAt, err = parseTime(acked); err != nil {
			return e, err
		}
	}
	return e, nil
}

// SignalEvents lists events newest first: open ones, then acknowledged.
func (d *DB) SignalEvents(ctx context.Context, f SignalFilter) ([]SignalEvent, error) {
	var where []string
	var args []any
	if f.Teams != nil {
		if len(f.Teams) == 0 {
			return nil, nil
		}
		where = append(where, "e.team IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.Teams)), ",")+")")
		for _, t := range f.Teams {
			args = append(args, t)
		}
	}
	if f.OpenOnly {
		where = append(where, "e.acknowledged_at IS NULL")
	}
	if f.Limit <= 0 {
		f.Limit = 200
	}
	q := `SELECT ` + signalCols + ` FROM signal_events e LEFT JOIN users u ON u.id = e.acknowledged_by`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY e.acknowledged_at IS NOT NULL, e.id DESC LIMIT ?"
	rows, err := d.sql.QueryContext(ctx, q, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: signal events: %w", err)
	}
	defer rows.Close()
	var out []SignalEvent
	for rows.Next() {
		e, err := scanSignal(rows)
		if err != nil {
			return nil, fmt.Errorf("store: signal events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// SignalEvent returns one event or ErrNotFound.
func (d *DB) SignalEvent(ctx context.Context, id int64) (SignalEvent, error) {
	e, err := scanSignal(d.sql.QueryRowContext(ctx, `SELECT `+signalCols+` FROM signal_events e LEFT JOIN users u ON u.id = e.acknowledged_by WHERE e.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("store: signal event %d: %w", id, err)
	}
	return e, nil
}

// AckSignal acknowledges an open event with a note, with an audit event,
// in one transaction; ErrAcknowledged when someone already did. The caller
// has checked the actor's right (workflow.ActionAckSignal) on the event's
// team.
func (d *DB) AckSignal(ctx context.Context, id int64, by workflow.Actor, note string, now time.Time) error {
	note = strings.TrimSpace(note)
	if note == "" {
		return errors.New("store: acknowledge signal: a note is required")
	}
	return d.inTx(ctx, func(tx *sql.Tx) error {
		var team, sig string
		var acked sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT team, signal, acknowledged_at FROM signal_events WHERE id = ?`, id).Scan(&team, &sig, &acked)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: acknowledge signal: %w", err)
		}
		if acked.Valid {
			return ErrAcknowledged
		}
		if _, err := tx.ExecContext(ctx, `UPDATE signal_events SET acknowledged_by = ?, acknowledged_at = ?, ack_note = ? WHERE id = ? AND acknowledged_at IS NULL`,
			by.ID, fmtTime(now), note, id); err != nil {
			return fmt.Errorf("store: acknowledge signal: %w", err)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "signal.acknowledge",
			ObjectType: "signal", ObjectID: id, Team: team, Reason: usage.SignalKind(sig).Title() + ": " + note})
	})
}

// TeamHours returns team's hourly rows in [from, to) (the signals'
// evaluator's read, usage.SignalStore).
func (d *DB) TeamHours(ctx context.Context, team string, from, to time.Time) ([]usage.Hour, error) {
	return d.UsageHours(ctx, UsageFilter{Team: team, From: from, To: to})
}

// LiveContracts is the approved contract of each team's newest live
// connection (the signals' evaluator's read, usage.SignalStore).
func (d *DB) LiveContracts(ctx context.Context) (map[string]workflow.Contract, error) {
	live, err := d.Provisioned(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]workflow.Contract{}
	for _, p := range live { // ascending ids: a newer connection wins
		v, err := d.Version(ctx, p.ConnectionID, p.Version)
		if err != nil {
			return nil, err
		}
		out[v.Contract.Team] = v.Contract
	}
	return out, nil
}
