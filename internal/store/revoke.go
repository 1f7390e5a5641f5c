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

// ErrReasonRequired: a revocation is recorded with why it happened.
var ErrReasonRequired = errors.New("store: a revocation needs a reason")

// Revoke starts the revocation of a connection, in one transaction: the
// lifecycle's revoke (to revoking) with the admin's reason in the audit
// trail, and a revoke job for the approved version, which the provisioner
// runs and whose completion moves the connection to revoked.
//
// Two jobs of a connection never touch the cluster at the same time: every
// unfinished job of another kind (a provisioning job that is queued,
// retrying or running) is failed in the same transaction, with an audit
// event. A running one loses its lease at once, so its worker stops at its
// next write; the step it may be applying at that moment is bounded by the
// lease (the worker gives each step half of it and extends the lease
// before each step), so the revoke job is due only when that lease
// expires. Revocation then removes whatever that last step created.
func (d *DB) Revoke(ctx context.Context, id int64, by Actor, reason string, now time.Time) (Connection, workflow.Job, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return Connection{}, workflow.Job{}, ErrReasonRequired
	}
	var jobID int64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := getConn(ctx, tx, id)
		if err != nil {
			return err
		}
		next, err := workflow.Transition(cur.State, workflow.EventRevoke, now)
		if err != nil {
			return err
		}
		if cur.ApprovedVersion == 0 {
			// The lifecycle allows revoke only from approval on.
			return fmt.Errorf("store: connection %d is %s but has no approved version", id, cur.State)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE connections SET state = ?, updated_at = ? WHERE id = ?`, next, fmtTime(now), id); err != nil {
			return err
		}
		if err := appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "connection.revoke",
			ObjectType: "connection", ObjectID: id, Team: cur.Team, Version: cur.ApprovedVersion, Reason: reason}); err != nil {
			return err
		}
		due, err := cancelOpenJobs(ctx, tx, cur, now)
		if err != nil {
			return err
		}
		if jobID, err = enqueueJob(ctx, tx, id, workflow.JobRevoke, cur.ApprovedVersion, "", now); err != nil {
			return err
		}
		if due.After(now) {
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET not_before = ? WHERE id = ?`, fmtTime(due), jobID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Connection{}, workflow.Job{}, fmt.Errorf("store: revoke: %w", err)
	}
	c, err := d.Connection(ctx, id)
	if err != nil {
		return Connection{}, workflow.Job{}, err
	}
	j, err := d.Job(ctx, jobID)
	return c, j, err
}

// cancelOpenJobs fails every unfinished job of c that is not a revocation,
// with an audit event each, and returns when the last lease among them
// expires (now when none was running).
func cancelOpenJobs(ctx context.Context, tx *sql.Tx, c Connection, now time.Time) (time.Time, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE connection_id = ? AND state IN ('queued', 'running') AND kind != ? ORDER BY id`,
		c.ID, workflow.JobRevoke)
	if err != nil {
		return now, err
	}
	var open []workflow.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return now, err
		}
		open = append(open, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return now, err
	}
	due := now
	for _, j := range open {
		if j.State == workflow.JobRunning && j.LeaseUntil.After(due) {
			due = j.LeaseUntil
		}
		msg := "cancelled: the connection is being revoked"
		if _, err := tx.ExecContext(ctx, `
UPDATE jobs SET state = 'failed', lease_owner = '', lease_until = '', last_error = ?, updated_at = ? WHERE id = ?`,
			msg, fmtTime(now), j.ID); err != nil {
			return now, err
		}
		action := string(j.Kind) + ".cancelled"
		if j.Kind == workflow.JobProvision {
			action = "provisioning.cancelled"
		}
		if err := appendAudit(ctx, tx, AuditEvent{At: now, Actor: provisioner, Action: action,
			ObjectType: "connection", ObjectID: c.ID, Team: c.Team, Version: j.Version,
			Reason: fmt.Sprintf("job %d (%s, attempt %d) %s", j.ID, j.State, j.Attempts, msg)}); err != nil {
			return now, err
		}
	}
	return due, nil
}

// EnqueueRevocation queues a new revoke job for a connection still in
// revoking, with an audit event: the way to try again after a revoke job
// failed (the connection stays revoking: its objects may still be there),
// or after a dry run of a connection that was provisioned for real.
func (d *DB) EnqueueRevocation(ctx context.Context, id int64, by Actor, reason string, now time.Time) (workflow.Job, error) {
	return d.enqueueFor(ctx, id, workflow.JobRevoke, []workflow.State{workflow.StateRevoking},
		workflow.EventRevocationDone, "revocation.enqueue", by, reason, now)
}

// startRevocation is StartJob's part for a revoke job of a revoking
// connection: its first attempt is recorded in the audit trail.
func startRevocation(ctx context.Context, tx *sql.Tx, j workflow.Job, c Connection, planHash string, steps int, dryRun bool, now time.Time) error {
	if j.AppliedPlanHash != "" {
		return nil // a resumed attempt
	}
	what := "removing"
	if dryRun {
		what = "dry run, removing nothing"
	}
	return appendAudit(ctx, tx, AuditEvent{At: now, Actor: provisioner, Action: "revocation.start",
		ObjectType: "connection", ObjectID: c.ID, Team: c.Team, Version: j.Version,
		Reason: fmt.Sprintf("job %d: %d steps, %s, plan %s", j.ID, steps, what, planHash)})
}

// completeRevocation is CompleteJob's part for a revoke job whose steps
// are all done: the connection moves from revoking to revoked.
//
// A dry run removed nothing. When nothing was ever applied to a cluster
// for the connection (every provisioning attempt was a dry run, or none
// ran), there is nothing to remove and the connection is revoked all the
// same. When something was, the connection stays revoking: saying revoked
// while its namespace and bindings may still exist would be a lie; an admin
// runs the revocation again (EnqueueRevocation) once a cluster is
// configured.
func completeRevocation(ctx context.Context, tx *sql.Tx, j workflow.Job, c Connection, now time.Time) (string, string, error) {
	action := "revocation.done"
	reason := fmt.Sprintf("job %d, attempt %d: %d steps done, plan %s", j.ID, j.Attempts, j.Steps, j.AppliedPlanHash)
	if j.DryRun {
		action = "revocation.dry_run"
		var applied bool
		if err := tx.QueryRowContext(ctx, `
SELECT EXISTS (SELECT 1 FROM jobs WHERE connection_id = ? AND kind != ? AND dry_run = 0 AND applied_plan_hash != '')`,
			c.ID, workflow.JobRevoke).Scan(&applied); err != nil {
			return "", "", err
		}
		if applied {
			return action, fmt.Sprintf("job %d: dry run, nothing removed: the connection was provisioned on a cluster, which a dry run "+
				"cannot touch; it stays revoking until the revocation runs again with a cluster configured", j.ID), nil
		}
		reason = fmt.Sprintf("job %d: dry run: nothing was ever applied to a cluster for this connection, so there is nothing to remove; "+
			"the %d steps record what revocation would remove", j.ID, j.Steps)
	}
	next, err := workflow.Transition(c.State, workflow.EventRevocationDone, now)
	if err != nil {
		return "", "", err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE connections SET state = ?, updated_at = ? WHERE id = ?`, next, fmtTime(now), c.ID); err != nil {
		return "", "", err
	}
	return action, reason, nil
}
