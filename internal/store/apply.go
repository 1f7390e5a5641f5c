package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// One writer. Every command on a connection runs the same way: a store
// method opens a write transaction, loads the connection (loadConn) and the
// facts its rule needs, calls the workflow command, which decides, and hands
// the effect to apply, which records it. apply is the only code that writes
// the connections table.

// loadConn reads a connection inside tx, as workflow's commands see it.
// withPeople also reads who edited and who submitted it (the decisions'
// independence rule).
func loadConn(ctx context.Context, tx *sql.Tx, id int64, withPeople bool) (Connection, workflow.Conn, error) {
	c, err := getConn(ctx, tx, id)
	if err != nil {
		return Connection{}, workflow.Conn{}, err
	}
	// The orchestrator is the approved version's, else the current one's.
	h, orch, err := versionFacts(ctx, tx, id, c.CurrentVersion)
	if err != nil {
		return Connection{}, workflow.Conn{}, err
	}
	s := connView(c, h)
	s.Orchestrator = orch
	if c.ApprovedVersion != 0 {
		if s.ApprovedHash, s.Orchestrator, err = versionFacts(ctx, tx, id, c.ApprovedVersion); err != nil {
			return Connection{}, workflow.Conn{}, err
		}
	}
	if withPeople {
		if s.EditorIDs, err = column[int64](ctx, tx, `SELECT DISTINCT author_id FROM contract_versions WHERE connection_id = ?`, id); err != nil {
			return Connection{}, workflow.Conn{}, err
		}
		if s.SubmitterIDs, err = submitterIDs(ctx, tx, id); err != nil {
			return Connection{}, workflow.Conn{}, err
		}
	}
	return c, s, nil
}

// connView is connection c as the workflow's commands see it, its current
// version's hash h; the approved version's hash and the people are the
// caller's to add.
func connView(c Connection, h string) workflow.Conn {
	return workflow.Conn{ID: c.ID, Team: c.Team, State: c.State, CurrentVersion: c.CurrentVersion, CurrentHash: h,
		ApprovedVersion: c.ApprovedVersion, Amendment: c.Amendment, RequesterID: c.RequesterID, Hold: c.Hold,
		ReviewDue: c.ReviewDue, Orphan: c.Orphan}
}

// staleError gives a workflow.StaleError the connection as it is now, for
// the page that explains what changed.
func staleError(err error, cur Connection) error {
	var st *workflow.StaleError
	if errors.As(err, &st) {
		return &StaleError{WantVersion: st.WantVersion, WantHash: st.WantHash, Current: cur, CurrentHash: st.CurrentHash}
	}
	return err
}

// command runs one workflow command on connection id in one write
// transaction: load, decide, apply. decide gets the transaction to read the
// facts its rule needs. It returns the connection after the command, the
// effect and the job it queued (0 for none).
func (d *DB) command(ctx context.Context, id int64, withPeople bool, now time.Time,
	decide func(tx *sql.Tx, cur Connection, s workflow.Conn) (workflow.Effect, error)) (Connection, workflow.Effect, int64, error) {
	var (
		eff   workflow.Effect
		jobID int64
	)
	err := d.inTx(ctx, func(tx *sql.Tx) (err error) {
		eff, jobID, err = commandIn(ctx, tx, id, withPeople, now, decide)
		return err
	})
	if err != nil {
		return Connection{}, eff, 0, err
	}
	c, err := d.Connection(ctx, id)
	return c, eff, jobID, err
}

// commandIn is a command inside the caller's transaction: it loads
// connection id as the workflow sees it, decides, and applies the effect.
func commandIn(ctx context.Context, tx *sql.Tx, id int64, withPeople bool, now time.Time,
	decide func(tx *sql.Tx, cur Connection, s workflow.Conn) (workflow.Effect, error)) (workflow.Effect, int64, error) {
	cur, s, err := loadConn(ctx, tx, id, withPeople)
	if err != nil {
		return workflow.Effect{}, 0, err
	}
	eff, err := decide(tx, cur, s)
	if err != nil {
		return eff, 0, staleError(err, cur)
	}
	_, jobID, err := apply(ctx, tx, &cur, eff, now)
	return eff, jobID, err
}

// apply records an effect inside the caller's transaction: the connection's
// row (inserted when cur is nil), the new contract version, the decision,
// the adoption, the cancelled and the queued job, the audit events and the
// outbox. It returns the connection's id and the queued job's (0 for none).
// Its parts are updateConnRow and recordDecision (here), applyJobs
// (apply_jobs.go) and recordReview (apply_reviews.go).
func apply(ctx context.Context, tx *sql.Tx, cur *Connection, e workflow.Effect, now time.Time) (int64, int64, error) {
	ts := fmtTime(now)
	var id int64
	var team string
	version := 0
	// What the connection holds before the change (capacity.go), when
	// the command writes its row.
	var heldBefore holding
	wrote := false
	switch {
	case cur == nil:
		if e.Version == nil || e.Next != workflow.StateDraft {
			return 0, 0, errors.New("store: a connection is created as a draft with its first version")
		}
		c := *e.Version
		team, version = c.Team, 1
		if err := tx.QueryRowContext(ctx, `
INSERT INTO connections (team, state, cluster_name, purpose, current_version, requester_id, created_at, updated_at)
VALUES (?, ?, ?, ?, 1, ?, ?, ?) RETURNING id`,
			c.Team, e.Next, c.ClusterName, purposeLine(c), e.Audit[0].Actor.ID, ts, ts).Scan(&id); err != nil {
			return 0, 0, fmt.Errorf("store: create connection: %w", err)
		}
	default:
		id, team, version = cur.ID, cur.Team, cur.CurrentVersion
		if e.Writes(cur.State) {
			var err error
			wrote = true
			if heldBefore, err = heldBy(ctx, tx, id); err != nil {
				return 0, 0, err
			}
			if version, err = updateConnRow(ctx, tx, id, version, e, ts); err != nil {
				return 0, 0, err
			}
		}
	}
	if e.Version != nil {
		if err := insertVersion(ctx, tx, id, version, *e.Version, e.By, now); err != nil {
			return 0, 0, err
		}
	}
	if wrote {
		heldAfter, err := heldBy(ctx, tx, id)
		if err != nil {
			return 0, 0, err
		}
		if err := capacityDelta(ctx, tx, heldBefore, heldAfter, now); err != nil {
			return 0, 0, err
		}
	}
	if err := recordDecision(ctx, tx, id, e, ts); err != nil {
		return 0, 0, err
	}
	jobID, cancelled, err := applyJobs(ctx, tx, id, team, e, now)
	if err != nil {
		return 0, 0, err
	}
	if len(e.ReviewTriggers) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO review_triggers (connection_id, version, fields, created_at) VALUES (?, ?, ?, ?)`,
			id, version, strings.Join(e.ReviewTriggers, " "), ts); err != nil {
			return 0, 0, fmt.Errorf("store: review trigger: %w", err)
		}
	}
	if err := recordReview(ctx, tx, id, team, cur, e, now); err != nil {
		return 0, 0, err
	}
	for _, a := range e.Audit {
		reason := a.Reason
		if a.JobRef {
			reason = fmt.Sprintf("job %d; %s", jobID, reason)
		}
		if err := appendAudit(ctx, tx, connAudit(id, team, a, reason, now)); err != nil {
			return 0, 0, err
		}
	}
	for _, c := range cancelled {
		if err := appendAudit(ctx, tx, c); err != nil {
			return 0, 0, err
		}
	}
	if err := insertNotices(ctx, tx, id, team, e.Notify, now); err != nil {
		return 0, 0, err
	}
	return id, jobID, nil
}

// insertNotices puts notices in the outbox, in the transaction that
// records what they tell (connID 0: about no connection, such as a
// cluster's signal); internal/notify delivers them.
func insertNotices(ctx context.Context, tx *sql.Tx, connID int64, team string, notices []workflow.Notice, now time.Time) error {
	var conn any
	if connID != 0 {
		conn = connID
	}
	for _, n := range notices {
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (connection_id, team, kind, recipients, subject, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			conn, team, n.Kind, string(n.To), n.Subject, n.Body, fmtTime(now)); err != nil {
			return fmt.Errorf("store: outbox: %w", err)
		}
	}
	return nil
}

// connAudit is the audit event of record a on connection id of team,
// with reason.
func connAudit(id int64, team string, a workflow.AuditRecord, reason string, now time.Time) AuditEvent {
	return AuditEvent{At: now, ActorID: a.Actor.ID, Actor: a.Actor.Email, Action: a.Action,
		ObjectType: "connection", ObjectID: id, Team: team, Version: a.Version, Reason: reason}
}

// Batch is one write transaction in which many commands are recorded, each
// applied by apply exactly as the store's methods apply theirs. It exists
// for loading a large installation at once (internal/support/benchseed): one
// commit per command would take minutes for tens of thousands of them.
// Unlike the store's methods, a batch reads no facts for a command's rule
// (an approval's inventory, committed capacity and claims): its caller
// gives them, and answers for them.
type Batch struct {
	ctx context.Context
	tx  *sql.Tx
}

// InBatch runs fn in one write transaction, committed when fn returns nil
// and rolled back whole otherwise.
func (d *DB) InBatch(ctx context.Context, fn func(*Batch) error) error {
	return d.inTx(ctx, func(tx *sql.Tx) error { return fn(&Batch{ctx: ctx, tx: tx}) })
}

// Create records eff, the effect of workflow.Create, and returns the new
// connection's id.
func (b *Batch) Create(eff workflow.Effect, now time.Time) (int64, error) {
	id, _, err := apply(b.ctx, b.tx, nil, eff, now)
	return id, err
}

// Command loads connection id as the workflow's commands see it (with who
// edited and submitted it when withPeople), decides with decide and
// records its effect. It returns the job the effect queued (0 for none).
func (b *Batch) Command(id int64, withPeople bool, now time.Time, decide func(workflow.Conn) (workflow.Effect, error)) (int64, error) {
	_, jobID, err := commandIn(b.ctx, b.tx, id, withPeople, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return decide(s)
	})
	return jobID, err
}

// updateConnRow writes what effect e changes on connection id's row
// (apply's), and returns its current version after.
func updateConnRow(ctx context.Context, tx *sql.Tx, id int64, version int, e workflow.Effect, ts string) (int, error) {
	set := []string{"state = ?", "updated_at = ?"}
	args := []any{e.Next, ts}
	if e.Version != nil {
		version++
		set = append(set, "current_version = ?", "cluster_name = ?", "purpose = ?")
		args = append(args, version, e.Version.ClusterName, purposeLine(*e.Version))
	}
	if e.Approve != 0 {
		set, args = append(set, "approved_version = ?"), append(args, e.Approve)
	}
	if e.Submitted {
		set, args = append(set, "submitted_at = ?"), append(args, ts)
	}
	if e.Amend != nil {
		set, args = append(set, "amendment = ?"), append(args, *e.Amend)
	}
	if e.ReviewDue != "" {
		set, args = append(set, "review_due = ?"), append(args, e.ReviewDue)
	}
	if h := e.Hold; h != nil {
		set = append(set, "hold = ?", "hold_by = ?", "hold_by_id = ?", "hold_reason = ?", "hold_at = ?")
		args = append(args, h.State, h.By.Email, h.By.ID, h.Reason, ts)
	}
	if e.Orphan != nil {
		set, args = append(set, "orphan = ?"), append(args, *e.Orphan)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE connections SET `+strings.Join(set, ", ")+` WHERE id = ?`, append(args, id)...); err != nil {
		return 0, fmt.Errorf("store: connection %d: %w", id, err)
	}
	return version, nil
}

// recordDecision records effect e's decision row on connection id and the
// namespace its approval adopts (apply's).
func recordDecision(ctx context.Context, tx *sql.Tx, id int64, e workflow.Effect, ts string) error {
	r := e.Decision
	if r == nil {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (connection_id, version, hash, kind, actor_id, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id, r.Version, r.Hash, r.Kind, e.By.ID, r.Reason, ts); err != nil {
		if isUniqueViolation(err) {
			return workflow.ErrAlreadyDecided
		}
		return fmt.Errorf("store: decision: %w", err)
	}
	if e.Adopt != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO namespace_adoptions (connection_id, version, namespace, actor_id, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (connection_id, version) DO NOTHING`, id, r.Version, e.Adopt, e.By.ID, ts); err != nil {
			return fmt.Errorf("store: adoption: %w", err)
		}
	}
	return nil
}
