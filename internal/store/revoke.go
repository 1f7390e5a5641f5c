package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Revoke starts the revocation of a connection (workflow.Revoke), in one
// transaction: the lifecycle's revoke (to revoking) with the admin's reason
// in the audit trail, and a revoke job for the approved version, which the
// provisioner runs and whose completion moves the connection to revoked.
//
// Two jobs of a connection never touch the cluster at the same time: every
// unfinished job of another kind (a provisioning job that is queued,
// retrying or running) is failed in the same transaction, with an audit
// event. A running one loses its lease at once, so its worker stops at its
// next write; the step it may be applying at that moment is bounded by the
// lease (the worker gives each step half of it and extends the lease
// before each step), so the revoke job is due only when that lease
// expires. Revocation then removes whatever that last step created.
func (d *DB) Revoke(ctx context.Context, id int64, by workflow.Actor, reason string, now time.Time) (Connection, workflow.Job, error) {
	c, _, jobID, err := d.command(ctx, id, false, now, func(_ *sql.Tx, _ Connection, s workflow.Conn) (workflow.Effect, error) {
		return workflow.Revoke(s, by, reason, now)
	})
	if err != nil {
		return Connection{}, workflow.Job{}, fmt.Errorf("store: revoke: %w", err)
	}
	j, err := d.Job(ctx, jobID)
	return c, j, err
}

// cancelOpenJobs fails the unfinished jobs of connection connID that c
// selects, with c's reason, and returns when the last lease among them
// expires (now when none was running) and the audit event of each, for
// apply to append.
func cancelOpenJobs(ctx context.Context, tx *sql.Tx, connID int64, team string, c workflow.JobCancel, now time.Time) (time.Time, []AuditEvent, error) {
	where, kind := `kind = ?`, c.Kind
	if c.Except != "" {
		where, kind = `kind != ?`, c.Except
	}
	msg := c.Reason
	rows, err := tx.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE connection_id = ? AND state IN ('queued', 'running') AND `+where+` ORDER BY id`,
		connID, string(kind))
	if err != nil {
		return now, nil, err
	}
	var open []workflow.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return now, nil, err
		}
		open = append(open, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return now, nil, err
	}
	if len(open) == 0 {
		return now, nil, nil
	}
	ids := make([]int64, len(open))
	for i, j := range open {
		ids[i] = j.ID
	}
	if err := endJobs(ctx, tx, ids, workflow.JobFailed, msg, now); err != nil {
		return now, nil, err
	}
	due := now
	var audits []AuditEvent
	for _, j := range open {
		if j.State == workflow.JobRunning && j.LeaseUntil.After(due) {
			due = j.LeaseUntil
		}
		action := string(j.Kind) + ".cancelled"
		if j.Kind == workflow.JobProvision {
			action = "provisioning.cancelled"
		}
		audits = append(audits, AuditEvent{At: now, Actor: provisioner, Action: action,
			ObjectType: "connection", ObjectID: connID, Team: team, Version: j.Version,
			Reason: fmt.Sprintf("job %d (%s, attempt %d) %s", j.ID, j.State, j.Attempts, msg)})
	}
	return due, audits, nil
}

// EnqueueRevocation queues a new revoke job for a connection still in
// revoking, with an audit event: the way to try again after a revoke job
// failed (the connection stays revoking: its objects may still be there),
// or after a dry run of a connection that was provisioned for real.
func (d *DB) EnqueueRevocation(ctx context.Context, id int64, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	return d.queueJob(ctx, id, workflow.JobRevoke, by, reason, now)
}
