package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ErrLeaseLost is returned by every write on a job the caller does not hold:
// its lease was taken over by another worker after it expired, or the job is
// no longer running. The caller must stop without writing anything else.
// It is workflow.ErrLeaseLost, which the provisioning worker's heartbeat
// also knows.
var ErrLeaseLost = workflow.ErrLeaseLost

// ErrJobOpen is returned when a connection already has an unfinished job of
// the kind being queued (workflow.ErrJobOpen).
var ErrJobOpen = workflow.ErrJobOpen

// ErrStepsNotDone is the readiness gate: a job completes only when every
// step of its plan is done (workflow.Job.CheckReady).
var ErrStepsNotDone = workflow.ErrStepsNotDone

// provisioner is the actor of the audit events the worker causes: the
// workflow's Provisioner, as its commands' audit records name it.
var provisioner = workflow.Provisioner.Email

const jobCols = `id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps,
	lease_owner, lease_until, not_before, last_error, dry_run, created_at, updated_at, from_version, stop_policy,
	COALESCE((SELECT a.namespace FROM namespace_adoptions a WHERE a.connection_id = jobs.connection_id AND a.version = jobs.version), '')`

func scanJob(sc interface{ Scan(...any) error }) (workflow.Job, error) {
	var j workflow.Job
	var leaseUntil, notBefore, created, updated string
	var connID sql.NullInt64 // NULL for a cluster job
	if err := sc.Scan(&j.ID, &connID, &j.Cluster, &j.Kind, &j.Version, &j.PlanHash, &j.AppliedPlanHash, &j.State, &j.Attempts, &j.Steps,
		&j.LeaseOwner, &leaseUntil, &notBefore, &j.LastError, &j.DryRun, &created, &updated, &j.FromVersion, &j.StopPolicy, &j.AdoptNamespace); err != nil {
		return j, err
	}
	j.ConnectionID = connID.Int64
	for _, f := range []struct {
		s string
		t *time.Time
	}{{leaseUntil, &j.LeaseUntil}, {notBefore, &j.NotBefore}, {created, &j.CreatedAt}, {updated, &j.UpdatedAt}} {
		if f.s == "" {
			continue
		}
		t, err := parseTime(f.s)
		if err != nil {
			return j, fmt.Errorf("job %d: %w", j.ID, err)
		}
		*f.t = t
	}
	return j, nil
}

func getJob(ctx context.Context, q queryer, id int64) (workflow.Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return workflow.Job{}, ErrNotFound
	}
	if err != nil {
		return workflow.Job{}, fmt.Errorf("store: job %d: %w", id, err)
	}
	return j, nil
}

// Job returns one job or ErrNotFound.
func (d *DB) Job(ctx context.Context, id int64) (workflow.Job, error) { return getJob(ctx, d.sql, id) }

// EnqueueProvisioning queues a new provisioning job for an approved
// connection's approved version, with an audit event: the way to try again
// after a job failed (the connection is back in approved) or after a dry run
// once a cluster is configured. Approve queues the first job itself.
//
// The new job is pinned to the plan hash the approval named (the approval's
// job carries it), so the worker applies only the plan that was approved; a
// connection whose approval named no plan gets ErrUnpinned and no job: a
// provisioning job is never queued unpinned.
func (d *DB) EnqueueProvisioning(ctx context.Context, connID int64, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	return d.queueJob(ctx, connID, workflow.JobProvision, by, reason, now)
}

// queueJob runs workflow.QueueJob: a job of kind for the approved
// version, with an audit event, in one transaction. A provisioning job is
// pinned to the plan hash the approval named.
func (d *DB) queueJob(ctx context.Context, connID int64, kind workflow.JobKind, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	_, _, id, err := d.command(ctx, connID, false, now, func(tx *sql.Tx, c Connection, s workflow.Conn) (workflow.Effect, error) {
		pinned := ""
		var err error
		switch {
		case kind == workflow.JobProvision && c.ApprovedVersion != 0:
			pinned, err = approvedPlanHash(ctx, tx, connID, workflow.JobProvision, c.ApprovedVersion)
		case kind == workflow.JobAmend:
			pinned, err = approvedPlanHash(ctx, tx, connID, workflow.JobAmend, c.CurrentVersion)
		}
		if err != nil {
			return workflow.Effect{}, err
		}
		return workflow.QueueJob(s, by, kind, pinned, reason, now)
	})
	if err != nil {
		return workflow.Job{}, fmt.Errorf("store: enqueue %s job: %w", kind, err)
	}
	return d.Job(ctx, id)
}

// approvedPlanHash is the plan hash the approval of a version named: the
// one its first pinned provisioning job carries; "" when there is none (an
// approval recorded before approvals named their plan), which
// workflow.QueueJob refuses.
func approvedPlanHash(ctx context.Context, tx *sql.Tx, connID int64, kind workflow.JobKind, version int) (string, error) {
	var h string
	err := tx.QueryRowContext(ctx, `SELECT plan_hash FROM jobs WHERE connection_id = ? AND kind = ? AND version = ? AND plan_hash != '' ORDER BY id LIMIT 1`,
		connID, kind, version).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: approved plan of connection %d: %w", connID, err)
	}
	return h, nil
}

// EnqueueReapply queues a job that re-applies the approved plan of a live
// connection and removes RoleBindings the plan does not contain: the fix
// for drift. The connection's state does not change.
func (d *DB) EnqueueReapply(ctx context.Context, connID int64, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	return d.queueJob(ctx, connID, workflow.JobReapply, by, reason, now)
}

// EnqueueAmendment queues a live connection's approved change again after
// its job failed (workflow.QueueJob: the amendment goes back from failed to
// approved), pinned to the plan its approval named.
func (d *DB) EnqueueAmendment(ctx context.Context, connID int64, by workflow.Actor, reason string, now time.Time) (workflow.Job, error) {
	return d.queueJob(ctx, connID, workflow.JobAmend, by, reason, now)
}

// ClaimJob takes the next job for owner and leases it until now+lease:
// first a running job whose lease has expired (its worker crashed or was
// stopped: it is the oldest work), else the queued job that has been due the
// longest. It counts the attempt. ok is false when nothing is due.
//
// Claims are exclusive: the read and the update run in one write
// transaction (inTx: BEGIN IMMEDIATE on SQLite, the writer lock on
// PostgreSQL), so concurrent claimers serialize and each sees the previous
// claim; on PostgreSQL the read also takes the row FOR UPDATE SKIP LOCKED. owner must be unique per worker: it is what every
// later write is checked against.
func (d *DB) ClaimJob(ctx context.Context, owner string, now time.Time, lease time.Duration) (workflow.Job, bool, error) {
	if owner == "" || lease <= 0 {
		return workflow.Job{}, false, fmt.Errorf("store: claim job: need an owner and a positive lease (got %q, %s)", owner, lease)
	}
	ts := fmtTime(now)
	const (
		expired = `SELECT id, lease_owner FROM jobs WHERE state = 'running' AND lease_until <= ? ORDER BY lease_until, id LIMIT 1`
		due     = `SELECT id, '' FROM jobs WHERE state = 'queued' AND not_before <= ? ORDER BY not_before, id LIMIT 1`
	)
	// An idle poll should not take the write lock: look first, outside a
	// transaction, and claim only when something is there.
	var candidates bool
	err := d.sql.QueryRowContext(ctx, `SELECT EXISTS (`+expired+`) OR EXISTS (`+due+`)`, ts, ts).Scan(&candidates)
	if err != nil {
		return workflow.Job{}, false, fmt.Errorf("store: claim job: %w", err)
	}
	if !candidates {
		return workflow.Job{}, false, nil
	}
	var j workflow.Job
	found := false
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		var id int64
		var prev string
		// On PostgreSQL the picked row is locked, and rows other
		// claimers hold are skipped (dialect.skipLocked).
		err := tx.QueryRowContext(ctx, expired+d.dialect.skipLocked(), ts).Scan(&id, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, due+d.dialect.skipLocked(), ts).Scan(&id, &prev)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil // another worker was faster
		}
		if err != nil {
			return fmt.Errorf("store: claim job: %w", err)
		}
		j, found, err = claimPicked(ctx, tx, id, prev, owner, now, lease)
		return err
	})
	if err != nil {
		return workflow.Job{}, false, err
	}
	return j, found, nil
}

// ClaimJobs takes up to limit jobs of one kind for owner in one
// transaction, each exactly as ClaimJob takes one: first the running jobs
// of that kind whose lease has expired (oldest lease first), then its
// queued jobs that are due (due the longest first); each is leased until
// now+lease, its attempt counted, its PreviousOwner set when it was taken
// over. The provisioning worker uses it to run many re-apply jobs from one
// snapshot of the cluster (provision.Worker, ReapplyBatch).
//
// Claims are exclusive as ClaimJob's are: one write transaction (BEGIN
// IMMEDIATE on SQLite, the writer lock on PostgreSQL), the rows read FOR
// UPDATE SKIP LOCKED on PostgreSQL, and the one update of all the picks
// re-checks, row by row, what the selects saw, so a job is claimed by one
// claimer however many replicas claim at once. It returns no jobs, and no error, when none is due.
func (d *DB) ClaimJobs(ctx context.Context, owner string, kind workflow.JobKind, now time.Time, lease time.Duration, limit int) ([]workflow.Job, error) {
	if owner == "" || lease <= 0 || limit <= 0 {
		return nil, fmt.Errorf("store: claim jobs: need an owner, a positive lease and a positive limit (got %q, %s, %d)", owner, lease, limit)
	}
	ts := fmtTime(now)
	const (
		expired = `SELECT id, lease_owner FROM jobs WHERE kind = ? AND state = 'running' AND lease_until <= ? ORDER BY lease_until, id LIMIT ?`
		due     = `SELECT id, '' FROM jobs WHERE kind = ? AND state = 'queued' AND not_before <= ? ORDER BY not_before, id LIMIT ?`
	)
	var jobs []workflow.Job
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		jobs = nil
		type pick struct {
			id   int64
			prev string
		}
		var picks []pick
		for _, q := range []string{expired, due} {
			if len(picks) >= limit {
				break
			}
			rows, err := tx.QueryContext(ctx, q+d.dialect.skipLocked(), kind, ts, limit-len(picks))
			if err != nil {
				return fmt.Errorf("store: claim jobs: %w", err)
			}
			for rows.Next() {
				var p pick
				if err := rows.Scan(&p.id, &p.prev); err != nil {
					rows.Close()
					return fmt.Errorf("store: claim jobs: %w", err)
				}
				picks = append(picks, p)
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("store: claim jobs: %w", err)
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("store: claim jobs: %w", err)
			}
		}
		if len(picks) == 0 {
			return nil
		}
		// Every pick claimed in one update, which re-checks what the
		// selects saw as claimPicked does, and read back in one select.
		ids := make([]int64, len(picks))
		for i, p := range picks {
			ids[i] = p.id
		}
		claimed, err := claimJobRows(ctx, tx, ids, owner, now.Add(lease), now)
		if err != nil {
			return fmt.Errorf("store: claim jobs: %w", err)
		}
		byID, err := jobsByID(ctx, tx, ids)
		if err != nil {
			return fmt.Errorf("store: claim jobs: %w", err)
		}
		for _, p := range picks {
			if claimed[p.id] {
				j := byID[p.id]
				j.PreviousOwner = p.prev
				jobs = append(jobs, j)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// claimPicked claims job id, which a claim's select picked inside tx
// (prev: the owner of its expired lease, if any), for owner until
// now+lease, counting the attempt. The update re-checks what the select
// saw (due, or its lease expired), so that the claim stays exclusive even
// if the select ran outside a write-locked transaction; ok is false when
// someone else claimed it after all.
func claimPicked(ctx context.Context, tx *sql.Tx, id int64, prev, owner string, now time.Time, lease time.Duration) (workflow.Job, bool, error) {
	claimed, err := claimJobRows(ctx, tx, []int64{id}, owner, now.Add(lease), now)
	if err != nil {
		return workflow.Job{}, false, fmt.Errorf("store: claim job %d: %w", id, err)
	}
	if !claimed[id] {
		return workflow.Job{}, false, nil
	}
	j, err := getJob(ctx, tx, id)
	if err != nil {
		return workflow.Job{}, false, err
	}
	j.PreviousOwner = prev
	return j, true, nil
}

// leased loads a job inside tx and checks that owner holds its lease.
func leased(ctx context.Context, tx *sql.Tx, jobID int64, owner string) (workflow.Job, error) {
	j, err := getJob(ctx, tx, jobID)
	if err != nil {
		return workflow.Job{}, err
	}
	return j, j.CheckLease(owner)
}

// ExtendLease moves the lease of a job owner holds to now+lease.
func (d *DB) ExtendLease(ctx context.Context, jobID int64, owner string, now time.Time, lease time.Duration) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		if err := extendJobLeases(ctx, tx, []int64{jobID}, now.Add(lease), now); err != nil {
			return fmt.Errorf("store: extend lease: %w", err)
		}
		return nil
	})
}

// StartJob begins an attempt of a job owner holds: it records the plan the
// attempt runs (its hash and step names, each step pending) and, for a
// provisioning job that is not a dry run, moves the connection from approved
// to provisioning with an audit event, all in one transaction.
//
// A resumed attempt (the connection is already provisioning) transitions
// nothing. Steps are reset to pending, keeping their attempt counts, so that
// the readiness gate sees only what this attempt did; rows beyond the plan's
// length (a plan that shrank since) are removed.
//
// A revoke job transitions nothing either (the connection moved to revoking
// when it was queued) but must find the connection revoking; its first
// attempt is audited as "revocation.start".
//
// A connection in any other state (revoked while the job waited, say) gives
// the lifecycle's *workflow.TransitionError and writes nothing: the caller
// fails the job.
func (d *DB) StartJob(ctx context.Context, jobID int64, owner, appliedPlanHash string, steps []string, dryRun bool, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		j, err := leased(ctx, tx, jobID, owner)
		if err != nil {
			return err
		}
		if j.ConnectionID == 0 {
			return startClusterJob(ctx, tx, j, appliedPlanHash, steps, dryRun, now)
		}
		run := jobRun(j)
		run.Steps, run.PlanHash, run.DryRun, run.Resumed = len(steps), appliedPlanHash, dryRun, j.AppliedPlanHash != ""
		if err := recordAttempts(ctx, tx, []workflow.JobStart{{JobID: jobID, PlanHash: appliedPlanHash, Steps: steps}}, dryRun, now); err != nil {
			return err
		}
		// A start the lifecycle refuses rolls the whole transaction back:
		// it writes nothing.
		return jobCommand(ctx, tx, j, now, func(s workflow.Conn) (workflow.Effect, error) { return workflow.OnJobStarted(s, run, now) })
	})
	if err != nil {
		return fmt.Errorf("store: start job %d: %w", jobID, err)
	}
	return nil
}

// stepRowsPerInsert bounds the rows of one multi-row INSERT of job steps:
// at most 8 parameters a row, well under SQLite's 32766 and PostgreSQL's
// 65535 parameters a statement.
const stepRowsPerInsert = 500

// jobRun is what the workflow's job commands see of a job.
func jobRun(j workflow.Job) workflow.JobRun {
	return workflow.JobRun{ID: j.ID, Kind: j.Kind, Version: j.Version, Attempts: j.Attempts, Steps: j.Steps,
		PlanHash: j.AppliedPlanHash, DryRun: j.DryRun, Resumed: j.AppliedPlanHash != ""}
}

// jobCommand runs one of the workflow's job commands on a job's connection
// inside the job's transaction: load, decide, apply. A refusal is returned
// and rolls the transaction back.
func jobCommand(ctx context.Context, tx *sql.Tx, j workflow.Job, now time.Time, cmd func(workflow.Conn) (workflow.Effect, error)) error {
	cur, s, err := loadConn(ctx, tx, j.ConnectionID, false)
	if err != nil {
		return err
	}
	eff, err := cmd(s)
	if err != nil {
		return err
	}
	_, _, err = apply(ctx, tx, &cur, eff, now)
	return err
}

// StepStarted marks step seq of a job owner holds as running and counts the
// run. A step re-run by a later attempt updates its row.
func (d *DB) StepStarted(ctx context.Context, jobID int64, owner string, seq int, name string, now time.Time) error {
	return d.step(ctx, jobID, owner, seq, name, workflow.StepRunning, "", "", now)
}

// StepFinished marks step seq done with what the apply did.
func (d *DB) StepFinished(ctx context.Context, jobID int64, owner string, seq int, name, outcome, detail string, now time.Time) error {
	return d.step(ctx, jobID, owner, seq, name, workflow.StepDone, outcome, detail, now)
}

// StepFailed marks step seq failed with the error's text.
func (d *DB) StepFailed(ctx context.Context, jobID int64, owner string, seq int, name, errText string, now time.Time) error {
	return d.step(ctx, jobID, owner, seq, name, workflow.StepFailed, "failed", errText, now)
}

func (d *DB) step(ctx context.Context, jobID int64, owner string, seq int, name string, st workflow.StepState, outcome, detail string, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		if err := stepTx(ctx, tx, jobID, seq, name, st, outcome, detail, now); err != nil {
			return err
		}
		return touchJob(ctx, tx, jobID, now)
	})
	if err != nil {
		return fmt.Errorf("store: job %d step %d: %w", jobID, seq, err)
	}
	return nil
}

// StartStep is StepStarted and ExtendLease in one transaction, the write a
// worker makes before each step (issue 15: it made both, one transaction
// each): it extends the lease of the job owner holds to now+lease and marks
// step seq running, counting the run. A lost lease writes nothing.
func (d *DB) StartStep(ctx context.Context, jobID int64, owner string, seq int, name string, now time.Time, lease time.Duration) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		if err := stepTx(ctx, tx, jobID, seq, name, workflow.StepRunning, "", "", now); err != nil {
			return err
		}
		return extendJobLeases(ctx, tx, []int64{jobID}, now.Add(lease), now)
	})
	if err != nil {
		return fmt.Errorf("store: job %d step %d: %w", jobID, seq, err)
	}
	return nil
}

// StepsDone records several steps of a job owner holds as run and done,
// in one transaction, each exactly as StartStep then StepFinished at now
// record it: its run counted, started and finished at now, its outcome and
// detail (steps' Seq, Name, Outcome and Detail; the rest is ignored); the
// lease is extended to now+lease. The provisioning worker uses it for the
// steps of a re-apply job that its snapshot answered without a request
// (issue 15: two transactions a step were most of a no-op re-apply's
// time). A lost lease writes nothing.
func (d *DB) StepsDone(ctx context.Context, jobID int64, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error {
	if len(steps) == 0 {
		return nil
	}
	ts := fmtTime(now)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		rows := make([]stepRow, len(steps))
		for i, st := range steps {
			rows[i] = stepRow{jobID: jobID, seq: st.Seq, name: st.Name, outcome: st.Outcome, detail: st.Detail}
		}
		if err := writeSteps(ctx, tx, rows, true, ts); err != nil {
			return err
		}
		return extendJobLeases(ctx, tx, []int64{jobID}, now.Add(lease), now)
	})
	if err != nil {
		return fmt.Errorf("store: job %d steps %d-%d: %w", jobID, steps[0].Seq, steps[len(steps)-1].Seq, err)
	}
	return nil
}

// stepTx writes step seq's row in state st, inside a transaction that has
// checked the lease.
func stepTx(ctx context.Context, tx *sql.Tx, jobID int64, seq int, name string, st workflow.StepState, outcome, detail string, now time.Time) error {
	ts := fmtTime(now)
	if st == workflow.StepRunning {
		_, err := tx.ExecContext(ctx, `
INSERT INTO job_steps (job_id, seq, name, state, attempts, started_at) VALUES (?, ?, ?, 'running', 1, ?)
ON CONFLICT (job_id, seq) DO UPDATE SET name = excluded.name, state = 'running', outcome = '', detail = '',
	attempts = job_steps.attempts + 1, started_at = excluded.started_at, finished_at = ''`, jobID, seq, name, ts)
		return err
	}
	_, err := tx.ExecContext(ctx, `
INSERT INTO job_steps (job_id, seq, name, state, outcome, detail, attempts, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
ON CONFLICT (job_id, seq) DO UPDATE SET name = excluded.name, state = excluded.state, outcome = excluded.outcome,
	detail = excluded.detail, finished_at = excluded.finished_at`, jobID, seq, name, st, outcome, detail, ts, ts)
	return err
}

// RetryJob gives a job owner holds back to the queue, due at notBefore,
// with the error that stopped this attempt. The connection stays
// provisioning: retries happen inside that state.
func (d *DB) RetryJob(ctx context.Context, jobID int64, owner string, notBefore time.Time, errText string, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leased(ctx, tx, jobID, owner); err != nil {
			return err
		}
		return requeueJob(ctx, tx, jobID, notBefore, errText, now)
	})
	if err != nil {
		return fmt.Errorf("store: retry job %d: %w", jobID, err)
	}
	return nil
}

// FailJob gives up on a job owner holds: the job fails with errText, a
// provisioning connection returns to approved (the approval stands; a new
// job can try again), and the audit trail records why, in one transaction.
// A failed revoke job leaves the connection revoking, never back to where
// it was: "revocation.failed" says why, and EnqueueRevocation tries again.
func (d *DB) FailJob(ctx context.Context, jobID int64, owner, errText string, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		j, err := leased(ctx, tx, jobID, owner)
		if err != nil {
			return err
		}
		if j.ConnectionID == 0 {
			return failClusterJob(ctx, tx, j, errText, now)
		}
		if err := endJobs(ctx, tx, []int64{jobID}, workflow.JobFailed, errText, now); err != nil {
			return err
		}
		return jobCommand(ctx, tx, j, now, func(s workflow.Conn) (workflow.Effect, error) {
			return workflow.OnJobFailed(s, jobRun(j), errText, now)
		})
	})
	if err != nil {
		return fmt.Errorf("store: fail job %d: %w", jobID, err)
	}
	return nil
}

// CompleteJob finishes a job owner holds, only when every step of its plan
// is done (ErrStepsNotDone otherwise: the readiness gate). The job succeeds
// and the connection moves from provisioning to active, with an audit
// event, in one transaction.
//
// A dry run is different: nothing was applied, so the connection must not
// become active. The job succeeds (its steps are the recorded plan), the
// connection stays approved and the audit trail says "provisioning.dry_run".
// (Should a real attempt have moved it to provisioning before the worker
// was restarted in dry-run mode, it goes back to approved.)
//
// A revoke job moves the connection from revoking to revoked
// ("revocation.done"); a dry-run revocation does only when nothing was ever
// applied to a cluster for the connection (workflow.OnJobSucceeded). An
// amend job moves the approved version to the change's.
func (d *DB) CompleteJob(ctx context.Context, jobID int64, owner string, now time.Time) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		j, err := leased(ctx, tx, jobID, owner)
		if err != nil {
			return err
		}
		var done int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM job_steps WHERE job_id = ? AND state = 'done' AND seq < ?`,
			jobID, j.Steps).Scan(&done); err != nil {
			return err
		}
		if err := j.CheckReady(done); err != nil {
			return err
		}
		if j.ConnectionID == 0 {
			return completeClusterJob(ctx, tx, j, now)
		}
		// Whether anything was ever applied to a cluster for the
		// connection: a dry-run revocation of one that was cannot say
		// revoked.
		var applied bool
		if err := tx.QueryRowContext(ctx, `
SELECT EXISTS (SELECT 1 FROM jobs WHERE connection_id = ? AND kind != ? AND dry_run = 0 AND applied_plan_hash != '')`,
			j.ConnectionID, workflow.JobRevoke).Scan(&applied); err != nil {
			return err
		}
		if err := endJobs(ctx, tx, []int64{jobID}, workflow.JobSucceeded, "", now); err != nil {
			return err
		}
		// The success, and the next review date it sets
		// (workflow.OnJobCompleted), which reads the versions it needs.
		version := func(v int) (workflow.Contract, error) {
			ver, err := getVersion(ctx, tx, j.ConnectionID, v)
			return ver.Contract, err
		}
		return jobCommand(ctx, tx, j, now, func(s workflow.Conn) (workflow.Effect, error) {
			return workflow.OnJobCompleted(s, jobRun(j), applied, now, version)
		})
	})
	if err != nil {
		return fmt.Errorf("store: complete job %d: %w", jobID, err)
	}
	return nil
}

// JobsFor returns a connection's jobs, newest first.
func (d *DB) JobsFor(ctx context.Context, connectionID int64) ([]workflow.Job, error) {
	return d.queryJobs(ctx, fmt.Sprintf("jobs of connection %d", connectionID),
		`SELECT `+jobCols+` FROM jobs WHERE connection_id = ? ORDER BY id DESC`, connectionID)
}

// queryJobs runs a query selecting jobCols and scans every row.
func (d *DB) queryJobs(ctx context.Context, op, q string, args ...any) ([]workflow.Job, error) {
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	defer rows.Close()
	var out []workflow.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	return out, nil
}

// JobSteps returns a job's steps in order.
func (d *DB) JobSteps(ctx context.Context, jobID int64) ([]workflow.JobStep, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT job_id, seq, name, state, outcome, detail, attempts, started_at, finished_at FROM job_steps WHERE job_id = ? ORDER BY seq`, jobID)
	if err != nil {
		return nil, fmt.Errorf("store: steps of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []workflow.JobStep
	for rows.Next() {
		var s workflow.JobStep
		var started, finished string
		if err := rows.Scan(&s.JobID, &s.Seq, &s.Name, &s.State, &s.Outcome, &s.Detail, &s.Attempts, &started, &finished); err != nil {
			return nil, fmt.Errorf("store: steps of job %d: %w", jobID, err)
		}
		for _, f := range []struct {
			s string
			t *time.Time
		}{{started, &s.StartedAt}, {finished, &s.FinishedAt}} {
			if f.s == "" {
				continue
			}
			if *f.t, err = parseTime(f.s); err != nil {
				return nil, fmt.Errorf("store: steps of job %d: %w", jobID, err)
			}
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
