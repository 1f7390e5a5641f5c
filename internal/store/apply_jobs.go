package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The jobs table's one writer. Every statement that inserts or updates a
// job is here, as one function per kind of write, each taking the caller's
// transaction (and many jobs at once where a batch needs it: one
// statement, not one a job). apply calls the ones an effect asks for (a
// job queued, superseded or cancelled); the job methods (jobs.go,
// jobbatch.go, clusterjobs.go) call the ones the worker's bookkeeping
// needs (a claim, a lease, an attempt's plan, a retry, an outcome), after
// checking the lease (workflow.CheckLease) in the same transaction.

// enqueueJob queues the job j orders inside the caller's transaction
// (apply's), due at notBefore: its stop policy is a hold job's, its
// from_version an amend job's (the approved version it replaces).
func enqueueJob(ctx context.Context, tx *sql.Tx, connID int64, j workflow.JobOrder, notBefore, now time.Time) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `
INSERT INTO jobs (connection_id, kind, version, plan_hash, stop_policy, from_version, state, not_before, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?) RETURNING id`,
		connID, j.Kind, j.Version, j.PlanHash, j.StopPolicy, j.FromVersion, fmtTime(notBefore), fmtTime(now), fmtTime(now)).Scan(&id)
	if err != nil {
		if isUniqueViolation(err) {
			return 0, ErrJobOpen
		}
		return 0, fmt.Errorf("store: enqueue %s job: %w", j.Kind, err)
	}
	return id, nil
}

// enqueueClusterJob queues a cluster job of kind on cluster, due now
// (ErrClusterJobOpen while one of that kind is unfinished).
func enqueueClusterJob(ctx context.Context, tx *sql.Tx, cluster string, kind workflow.JobKind, now time.Time) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `
INSERT INTO jobs (connection_id, cluster, kind, version, state, not_before, created_at, updated_at)
VALUES (NULL, ?, ?, 0, 'queued', ?, ?, ?) RETURNING id`,
		cluster, kind, fmtTime(now), fmtTime(now), fmtTime(now)).Scan(&id)
	if isUniqueViolation(err) {
		return 0, ErrClusterJobOpen
	}
	if err != nil {
		return 0, fmt.Errorf("store: enqueue %s cluster job: %w", kind, err)
	}
	return id, nil
}

// claimJobRows claims the jobs ids name for owner until leaseUntil,
// counting the attempt, in one statement that re-checks, row by row, what
// the claim's select saw (due, or its lease expired), so that a claim is
// exclusive even if the select ran outside a write-locked transaction. It
// returns the ids it claimed.
func claimJobRows(ctx context.Context, tx *sql.Tx, ids []int64, owner string, leaseUntil, now time.Time) (map[int64]bool, error) {
	ts := fmtTime(now)
	in, inArgs := idList(ids)
	claimed := make(map[int64]bool, len(ids))
	err := eachRow(ctx, tx, func(rows *sql.Rows) error {
		var id int64
		err := rows.Scan(&id)
		claimed[id] = true
		return err
	}, `
UPDATE jobs SET state = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
WHERE id IN `+in+` AND ((state = 'queued' AND not_before <= ?) OR (state = 'running' AND lease_until <= ?)) RETURNING id`,
		append(append([]any{owner, fmtTime(leaseUntil), ts}, inArgs...), ts, ts)...)
	return claimed, err
}

// extendJobLeases moves the lease of the jobs ids name to until.
func extendJobLeases(ctx context.Context, tx *sql.Tx, ids []int64, until, now time.Time) error {
	in, inArgs := idList(ids)
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id IN `+in,
		append([]any{fmtTime(until), fmtTime(now)}, inArgs...)...)
	return err
}

// touchJob stamps a job's updated_at (a step of it moved).
func touchJob(ctx context.Context, tx *sql.Tx, jobID int64, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET updated_at = ? WHERE id = ?`, fmtTime(now), jobID)
	return err
}

// recordAttempts records the plan each attempt of starts runs (issue 15:
// many jobs in a statement or a few per table): its hash and step count on
// the job, each step pending (keeping its attempt count) and no step rows
// beyond the plan's length. dryRun is every attempt's.
func recordAttempts(ctx context.Context, tx *sql.Tx, starts []workflow.JobStart, dryRun bool, now time.Time) error {
	ts := fmtTime(now)
	ids := make([]int64, len(starts))
	hashes, lengths := make([]any, 0, 2*len(starts)), make([]any, 0, 2*len(starts))
	var rows []stepRow
	for i, s := range starts {
		ids[i] = s.JobID
		hashes = append(hashes, s.JobID, s.PlanHash)
		lengths = append(lengths, s.JobID, len(s.Steps))
		for seq, name := range s.Steps {
			rows = append(rows, stepRow{jobID: s.JobID, seq: seq, name: name})
		}
	}
	in, inArgs := idList(ids)
	args := append(append(append(hashes, lengths...), dryRun, ts), inArgs...)
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET applied_plan_hash = `+caseByID(len(starts), "id", "?")+`,
	steps = `+caseByID(len(starts), "id", "CAST(? AS INTEGER)")+`, dry_run = ?, updated_at = ? WHERE id IN `+in, args...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM job_steps WHERE job_id IN `+in+` AND seq >= `+caseByID(len(starts), "job_id", "CAST(? AS INTEGER)"),
		append(append([]any{}, inArgs...), lengths...)...); err != nil {
		return err
	}
	return writeSteps(ctx, tx, rows, false, ts)
}

// requeueJob gives a job back to the queue, due at notBefore, with the
// error that stopped its attempt.
func requeueJob(ctx context.Context, tx *sql.Tx, jobID int64, notBefore time.Time, errText string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `
UPDATE jobs SET state = 'queued', lease_owner = '', lease_until = '', not_before = ?, last_error = ?, updated_at = ? WHERE id = ?`,
		fmtTime(notBefore), errText, fmtTime(now), jobID)
	return err
}

// endJobs ends the jobs ids name: succeeded (errText "") or failed with
// errText, their leases released.
func endJobs(ctx context.Context, tx *sql.Tx, ids []int64, state workflow.JobState, errText string, now time.Time) error {
	if state != workflow.JobSucceeded && state != workflow.JobFailed {
		return fmt.Errorf("store: a job ends succeeded or failed, not %s", state)
	}
	in, inArgs := idList(ids)
	_, err := tx.ExecContext(ctx, `
UPDATE jobs SET state = ?, lease_owner = '', lease_until = '', last_error = ?, updated_at = ? WHERE id IN `+in,
		append([]any{state, errText, fmtTime(now)}, inArgs...)...)
	return err
}

// applyJobs records effect e's jobs on connection id of team (apply's):
// the unfinished ones it cancels (workflow's JobCancel: a revocation's, a
// superseded hold job), the one it queues, due when the lease of any it
// cancelled expires. It returns the queued job
// (0 for none) and the audit events of the cancelled ones.
func applyJobs(ctx context.Context, tx *sql.Tx, id int64, team string, e workflow.Effect, now time.Time) (int64, []AuditEvent, error) {
	due := now
	var cancelled []AuditEvent
	if c := e.Cancel; c != nil {
		var err error
		if due, cancelled, err = cancelOpenJobs(ctx, tx, id, team, *c, now); err != nil {
			return 0, nil, err
		}
	}
	var jobID int64
	if j := e.Job; j != nil {
		if err := j.Check(); err != nil {
			return 0, nil, err // a provisioning job is never queued unpinned
		}
		var err error
		if jobID, err = enqueueJob(ctx, tx, id, *j, due, now); err != nil {
			return 0, nil, err
		}
	}
	return jobID, cancelled, nil
}
