package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
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
// returns how many it stored: evaluating again while a signal stays
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
			res, err := tx.ExecContext(ctx, `
INSERT INTO signal_events (team, signal, fired_at, detail, owner, response) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING`, s.Team, string(s.Kind), fmtTime(now), detail, s.Owner, s.Response)
			if err != nil {
				return fmt.Errorf("store: record signal: %w", err)
			}
			if k, _ := res.RowsAffected(); k == 0 {
				continue
			}
			id, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("store: record signal: %w", err)
			}
			n++
			if err := appendAudit(ctx, tx, AuditEvent{At: now, Actor: "signals", Action: "signal.fired",
				ObjectType: "signal", ObjectID: id, Team: s.Team, Reason: s.Kind.Title() + ": " + detail}); err != nil {
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

// Signals evaluates the watched signals over the stored usage rows: every
// team with a live connection (its newest one's approved contract) and the
// cluster.
type Signals struct {
	DB           *DB
	Accelerators map[string]int // per instance type
	Thresholds   usage.Thresholds
	// ClusterOwner answers for the cluster's signals (the platform's
	// admins).
	ClusterOwner string
	// Utilization is how busy the GPUs each namespace holds are (the
	// interface declared in internal/usage; cmd/portal hands in the
	// Prometheus client, which this package never imports). nil: no
	// --prometheus-url, and the utilization signal says "no-data".
	Utilization usage.Utilization
	Logger      *slog.Logger
}

// Statuses computes every signal at now; teams, when not nil, limits the
// teams' signals to those (and leaves out the cluster's).
func (s Signals) Statuses(ctx context.Context, now time.Time, teams []string) ([]usage.SignalStatus, error) {
	th := s.Thresholds
	if th == (usage.Thresholds{}) {
		th = usage.DefaultThresholds
	}
	from := usage.HourStart(now).Add(-th.Window())
	to := usage.HourStart(now).Add(time.Hour)
	cluster, err := s.DB.ClusterHours(ctx, "", from, to)
	if err != nil {
		return nil, err
	}
	contracts, err := s.liveContracts(ctx)
	if err != nil {
		return nil, err
	}
	var out []usage.SignalStatus
	if teams == nil {
		out = append(out, usage.EvaluateCluster(cluster, now, th, s.ClusterOwner)...)
	}
	names := make([]string, 0, len(contracts))
	for t := range contracts {
		if teams == nil || containsStr(teams, t) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	for _, t := range names {
		hours, err := s.DB.UsageHours(ctx, UsageFilter{Team: t, From: from, To: to})
		if err != nil {
			return nil, err
		}
		series := s.utilization(ctx, t, hours, now, th)
		out = append(out, usage.EvaluateTeam(usage.TeamInput{Contract: contracts[t], Accelerators: s.Accelerators, Hours: hours, Utilization: series}, cluster, now, th)...)
	}
	return out, nil
}

// utilization reads, from the source, the hourly utilization of each
// namespace in which the team held accelerators during the utilization
// signal's window (the whole hours before now). A failure is the series'
// Err (that signal says so), not the evaluation's.
func (s Signals) utilization(ctx context.Context, team string, rows []usage.Hour, now time.Time, th usage.Thresholds) usage.UtilizationSeries {
	if !usage.Configured(s.Utilization) {
		return usage.UtilizationSeries{}
	}
	end := usage.HourStart(now)
	from := end.Add(-time.Duration(th.UtilizationDays) * 24 * time.Hour)
	out := usage.UtilizationSeries{Configured: true, Points: map[string][]usage.Point{}}
	var namespaces []string
	for _, r := range rows {
		if r.AccelSeconds() > 0 && !r.Start.Before(from) && r.Start.Before(end) && !containsStr(namespaces, r.Namespace) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		points, err := s.Utilization.NamespaceUtilization(ctx, ns, from, end, time.Hour)
		if err != nil {
			if s.Logger != nil {
				s.Logger.WarnContext(ctx, "utilization unavailable for the signals", "team", team, "namespace", ns, "err", err)
			}
			out.Err = err
			return out
		}
		out.Points[ns] = points
	}
	return out
}

// liveContracts is the approved contract of each team's newest live
// connection.
func (s Signals) liveContracts(ctx context.Context) (map[string]workflow.Contract, error) {
	live, err := s.DB.Provisioned(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]workflow.Contract{}
	for _, p := range live { // ascending ids: a newer connection wins
		v, err := s.DB.Version(ctx, p.ConnectionID, p.Version)
		if err != nil {
			return nil, err
		}
		out[v.Contract.Team] = v.Contract
	}
	return out, nil
}

// Evaluate computes every signal at now and records those that fire (one
// open event per team and signal); it returns how many new events it
// stored. The background loop calls it; it is safe to call concurrently.
func (s Signals) Evaluate(ctx context.Context, now time.Time) (int, error) {
	st, err := s.Statuses(ctx, now, nil)
	if err != nil {
		return 0, err
	}
	return s.DB.RecordFired(ctx, st, now)
}

// Run evaluates every interval until ctx is done.
func (s Signals) Run(ctx context.Context, interval time.Duration, clock func() time.Time) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.Evaluate(ctx, clock()); err != nil && ctx.Err() == nil {
			if s.Logger != nil {
				s.Logger.Error("signal evaluation failed", "err", err)
			}
		} else if n > 0 && s.Logger != nil {
			s.Logger.Info("signals fired", "new_events", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
