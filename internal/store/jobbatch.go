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

// Many jobs' writes in one transaction (issue 15, "no-op reconcile"). The
// provisioning worker runs an admin's Re-apply of many connections as one
// batch (provision.Worker, runReapplyBatch). Recorded job by job, each job
// cost three transactions of about thirty statements (its start, its
// answered steps, its completion, each with a lease check, a connection
// load and an audit append): on PostgreSQL, where every statement is a
// round trip, that was five times the cluster's own reads. StartJobs,
// StepsDoneAll and CompleteJobs record the same rows for many jobs in one
// transaction each, a statement or a few per table.
//
// Each writes exactly what the one-job method would (StartJob, StepsDone,
// CompleteJob), job after job, in the order given. Each decides nothing
// itself beyond what those do, and refuses the whole batch, writing
// nothing, when any job is not one it can record so: a lease not held, a
// job without a connection, two jobs of one connection, a start or a
// completion whose effect on the connection is more than audit events
// (workflow.Effect.AuditOnly), a lifecycle refusal, steps not done. The
// caller then records each job on its own with the one-job method, which
// settles each as before; ErrBatchRefused wraps the reason.

// ErrBatchRefused is returned, wrapping the reason, when a batch method
// wrote nothing because one of its jobs must be recorded on its own.
var ErrBatchRefused = errors.New("store: record these jobs one by one")

// StartJobs is StartJob for several jobs owner holds, in one transaction:
// each attempt's plan (its hash and step names, each step pending, keeping
// its attempt count; no rows beyond the plan's length) and its start's
// audit events. dryRun is every attempt's.
func (d *DB) StartJobs(ctx context.Context, owner string, starts []workflow.JobStart, dryRun bool, now time.Time) error {
	if len(starts) == 0 {
		return nil
	}
	ids := make([]int64, len(starts))
	for i, s := range starts {
		ids[i] = s.JobID
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		jobs, err := leasedJobs(ctx, tx, ids, owner)
		if err != nil {
			return err
		}
		conns, views, err := loadConns(ctx, tx, jobs)
		if err != nil {
			return err
		}
		// Decide first: a refusal writes nothing.
		var events []AuditEvent
		for i, s := range starts {
			j := jobs[i]
			run := jobRun(j)
			run.Steps, run.PlanHash, run.DryRun, run.Resumed = len(s.Steps), s.PlanHash, dryRun, j.AppliedPlanHash != ""
			eff, err := workflow.OnJobStarted(views[i], run, now)
			if err != nil {
				return fmt.Errorf("%w: job %d: %w", ErrBatchRefused, j.ID, err)
			}
			if !eff.AuditOnly(views[i].State) {
				return fmt.Errorf("%w: job %d: its start changes connection %d", ErrBatchRefused, j.ID, j.ConnectionID)
			}
			events = append(events, effectAudit(conns[i], eff, now)...)
		}
		if err := recordAttempts(ctx, tx, starts, dryRun, now); err != nil {
			return err
		}
		return appendAudits(ctx, tx, d.dialect, events)
	})
	if err != nil {
		return fmt.Errorf("store: start jobs %v: %w", ids, err)
	}
	return nil
}

// StepsDoneAll is StepsDone for the steps of several jobs owner holds (each
// step's JobID names its job), in one transaction: each step run and done
// at now with its outcome and detail, each job's lease extended to
// now+lease.
func (d *DB) StepsDoneAll(ctx context.Context, owner string, steps []workflow.JobStep, now time.Time, lease time.Duration) error {
	if len(steps) == 0 {
		return nil
	}
	var ids []int64
	rows := make([]stepRow, len(steps))
	for i, st := range steps {
		if i == 0 || st.JobID != steps[i-1].JobID {
			ids = append(ids, st.JobID)
		}
		rows[i] = stepRow{jobID: st.JobID, seq: st.Seq, name: st.Name, outcome: st.Outcome, detail: st.Detail}
	}
	ts := fmtTime(now)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := leasedJobs(ctx, tx, ids, owner); err != nil {
			return err
		}
		if err := writeSteps(ctx, tx, rows, true, ts); err != nil {
			return err
		}
		return extendJobLeases(ctx, tx, ids, now.Add(lease), now)
	})
	if err != nil {
		return fmt.Errorf("store: steps of jobs %v: %w", ids, err)
	}
	return nil
}

// CompleteJobs is CompleteJob for several jobs owner holds, in one
// transaction: each job, every step of its plan done, succeeds, with the
// audit events of its success.
func (d *DB) CompleteJobs(ctx context.Context, owner string, ids []int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		jobs, err := leasedJobs(ctx, tx, ids, owner)
		if err != nil {
			return err
		}
		in, inArgs := idList(ids)
		done := map[int64]int{}
		if err := eachRow(ctx, tx, func(rows *sql.Rows) error {
			var id int64
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			done[id] = n
			return nil
		}, `SELECT s.job_id, count(*) FROM job_steps s JOIN jobs j ON j.id = s.job_id
WHERE s.job_id IN `+in+` AND s.state = 'done' AND s.seq < j.steps GROUP BY s.job_id`, inArgs...); err != nil {
			return err
		}
		for _, j := range jobs {
			if err := j.CheckReady(done[j.ID]); err != nil {
				return fmt.Errorf("%w: job %d: %w", ErrBatchRefused, j.ID, err)
			}
		}
		// Whether anything was ever applied to a cluster for each
		// connection (CompleteJob's question, asked of all at once).
		connIn, connArgs := idList(connIDs(jobs))
		applied := map[int64]bool{}
		if err := eachRow(ctx, tx, func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			applied[id] = true
			return nil
		}, `SELECT DISTINCT connection_id FROM jobs WHERE connection_id IN `+connIn+` AND kind != ? AND dry_run = 0 AND applied_plan_hash != ''`,
			append(connArgs, workflow.JobRevoke)...); err != nil {
			return err
		}
		conns, views, err := loadConns(ctx, tx, jobs)
		if err != nil {
			return err
		}
		var events []AuditEvent
		for i, j := range jobs {
			eff, err := workflow.OnJobSucceeded(views[i], jobRun(j), applied[j.ConnectionID], now)
			if err != nil {
				return fmt.Errorf("%w: job %d: %w", ErrBatchRefused, j.ID, err)
			}
			// CompleteJob's next review date is set only by an effect
			// that moves the connection: never an audit-only one.
			if !eff.AuditOnly(views[i].State) {
				return fmt.Errorf("%w: job %d: its success changes connection %d", ErrBatchRefused, j.ID, j.ConnectionID)
			}
			events = append(events, effectAudit(conns[i], eff, now)...)
		}
		if err := endJobs(ctx, tx, ids, workflow.JobSucceeded, "", now); err != nil {
			return err
		}
		return appendAudits(ctx, tx, d.dialect, events)
	})
	if err != nil {
		return fmt.Errorf("store: complete jobs %v: %w", ids, err)
	}
	return nil
}

// leasedJobs is leased for several jobs, in ids' order, read at once: each
// must be running, leased to owner, on a connection, and no two on one
// connection.
func leasedJobs(ctx context.Context, tx *sql.Tx, ids []int64, owner string) ([]workflow.Job, error) {
	byID, err := jobsByID(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]workflow.Job, len(ids))
	seen := map[int64]bool{}
	for i, id := range ids {
		j, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("job %d: %w", id, ErrNotFound)
		}
		if err := j.CheckLease(owner); err != nil {
			return nil, err
		}
		if j.ConnectionID == 0 || seen[j.ConnectionID] {
			return nil, fmt.Errorf("%w: job %d: a cluster job, or a second job of connection %d", ErrBatchRefused, id, j.ConnectionID)
		}
		seen[j.ConnectionID] = true
		out[i] = j
	}
	return out, nil
}

// jobsByID reads the jobs ids name, in one query.
func jobsByID(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]workflow.Job, error) {
	in, args := idList(ids)
	byID := make(map[int64]workflow.Job, len(ids))
	err := eachRow(ctx, tx, func(rows *sql.Rows) error {
		j, err := scanJob(rows)
		byID[j.ID] = j
		return err
	}, `SELECT `+jobCols+` FROM jobs WHERE id IN `+in, args...)
	return byID, err
}

// loadConns is loadConn (without the people) for each job's connection,
// in jobs' order, in two reads.
func loadConns(ctx context.Context, tx *sql.Tx, jobs []workflow.Job) ([]Connection, []workflow.Conn, error) {
	in, args := idList(connIDs(jobs))
	byID := map[int64]Connection{}
	if err := eachRow(ctx, tx, func(rows *sql.Rows) error {
		c, err := scanConn(rows)
		byID[c.ID] = c
		return err
	}, `SELECT `+connCols+` FROM connections c JOIN users u ON u.id = c.requester_id WHERE c.id IN `+in, args...); err != nil {
		return nil, nil, err
	}
	type key struct {
		id      int64
		version int
	}
	hashes := map[key]string{}
	if err := eachRow(ctx, tx, func(rows *sql.Rows) error {
		var k key
		var h string
		if err := rows.Scan(&k.id, &k.version, &h); err != nil {
			return err
		}
		hashes[k] = h
		return nil
	}, `SELECT cv.connection_id, cv.version, cv.hash FROM contract_versions cv JOIN connections c ON c.id = cv.connection_id
WHERE c.id IN `+in+` AND (cv.version = c.current_version OR cv.version = c.approved_version)`, args...); err != nil {
		return nil, nil, err
	}
	conns := make([]Connection, len(jobs))
	views := make([]workflow.Conn, len(jobs))
	for i, j := range jobs {
		c, ok := byID[j.ConnectionID]
		if !ok {
			return nil, nil, fmt.Errorf("store: connection %d: %w", j.ConnectionID, ErrNotFound)
		}
		h, ok := hashes[key{c.ID, c.CurrentVersion}]
		if !ok {
			return nil, nil, fmt.Errorf("store: version %d of connection %d: %w", c.CurrentVersion, c.ID, sql.ErrNoRows)
		}
		s := connView(c, h)
		if c.ApprovedVersion != 0 {
			if s.ApprovedHash, ok = hashes[key{c.ID, c.ApprovedVersion}]; !ok {
				return nil, nil, fmt.Errorf("store: version %d of connection %d: %w", c.ApprovedVersion, c.ID, sql.ErrNoRows)
			}
		}
		conns[i], views[i] = c, s
	}
	return conns, views, nil
}

// effectAudit is the audit events apply records for an effect on c that
// queues no job.
func effectAudit(c Connection, e workflow.Effect, now time.Time) []AuditEvent {
	out := make([]AuditEvent, len(e.Audit))
	for i, a := range e.Audit {
		out[i] = connAudit(c.ID, c.Team, a, a.Reason, now)
	}
	return out
}

func connIDs(jobs []workflow.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ConnectionID
	}
	return out
}

// idList is "(?, ?, ...)" for ids and its arguments.
func idList[T any](ids []T) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")", args
}

// caseByID is "CASE col WHEN ? THEN value ... END" for n rows; its
// arguments are each row's id and value, in pairs.
func caseByID(n int, col, value string) string {
	var b strings.Builder
	b.WriteString("CASE " + col)
	for range n {
		b.WriteString(" WHEN ? THEN " + value)
	}
	b.WriteString(" END")
	return b.String()
}

// eachRow runs query inside tx and calls scan on each row.
func eachRow(ctx context.Context, tx *sql.Tx, scan func(*sql.Rows) error, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// stepRow is one job_steps row writeSteps writes.
type stepRow struct {
	jobID           int64
	seq             int
	name            string
	outcome, detail string
}

// writeSteps writes step rows, stepRowsPerInsert a statement (issue 15: a
// statement a step was much of a re-apply batch's store time). done false
// is recordAttempt's write: each step pending, its attempt count kept, its
// outcome and times cleared. done true is StepsDone's: StartStep's row (its
// run counted, started at ts, outcome and detail cleared), then
// StepFinished's (done, outcome, detail, finished at ts), in one write.
func writeSteps(ctx context.Context, tx *sql.Tx, rows []stepRow, done bool, ts string) error {
	for start := 0; start < len(rows); start += stepRowsPerInsert {
		part := rows[start:min(start+stepRowsPerInsert, len(rows))]
		var q strings.Builder
		args := make([]any, 0, 7*len(part))
		if done {
			q.WriteString(`INSERT INTO job_steps (job_id, seq, name, state, outcome, detail, attempts, started_at, finished_at) VALUES `)
		} else {
			q.WriteString(`INSERT INTO job_steps (job_id, seq, name, state) VALUES `)
		}
		for i, r := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			if done {
				q.WriteString(`(?, ?, ?, 'done', ?, ?, 1, ?, ?)`)
				args = append(args, r.jobID, r.seq, r.name, r.outcome, r.detail, ts, ts)
			} else {
				q.WriteString(`(?, ?, ?, 'pending')`)
				args = append(args, r.jobID, r.seq, r.name)
			}
		}
		if done {
			q.WriteString(`
ON CONFLICT (job_id, seq) DO UPDATE SET name = excluded.name, state = 'done', outcome = excluded.outcome, detail = excluded.detail,
	attempts = job_steps.attempts + 1, started_at = excluded.started_at, finished_at = excluded.finished_at`)
		} else {
			q.WriteString(`
ON CONFLICT (job_id, seq) DO UPDATE SET name = excluded.name, state = 'pending', outcome = '', detail = '', started_at = '', finished_at = ''`)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}
