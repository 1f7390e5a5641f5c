package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

const testClusterARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6"

// clusterAudit is the actions and reasons of the cluster's audit events,
// oldest first.
func (f *fixture) clusterAudit() []string {
	f.t.Helper()
	evs, err := f.db.AuditEvents(f.t.Context(), store.AuditFilter{ObjectType: "cluster"}, 0, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range slices.Backward(evs) {
		out = append(out, e.Action+" "+e.Actor+" "+e.Reason)
	}
	return out
}

func TestSchedulerJobLifecycle(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	admin := f.admins[0]
	j, err := f.db.EnqueueScheduler(ctx, testClusterARN, admin, "classes changed", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if j.ConnectionID != 0 || j.Cluster != testClusterARN || j.Kind != workflow.JobScheduler || j.State != workflow.JobQueued || j.Version != 0 {
		t.Fatalf("queued job = %+v", j)
	}
	// At most one open scheduler job: a second is refused and writes nothing.
	before := f.clusterAudit()
	if _, err := f.db.EnqueueScheduler(ctx, testClusterARN, admin, "again", f.tick()); !errors.Is(err, store.ErrClusterJobOpen) {
		t.Fatalf("second enqueue: %v, want ErrClusterJobOpen", err)
	}
	if js, _ := f.db.ClusterJobs(ctx, workflow.JobScheduler, 10); len(js) != 1 {
		t.Errorf("%d scheduler jobs after a refused enqueue, want 1", len(js))
	}
	if after := f.clusterAudit(); !slices.Equal(before, after) {
		t.Errorf("a refused enqueue wrote audit events: %q", after)
	}

	// First attempt fails transiently and is retried; the second succeeds.
	c := f.claim("w")
	if c.ID != j.ID || c.Attempts != 1 {
		t.Fatalf("claimed %+v", c)
	}
	step := "scheduler config a1b2c3d4e5f6-portal-scheduler"
	if err := f.db.StartJob(ctx, j.ID, "w", "", []string{step}, false, f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.StepStarted(ctx, j.ID, "w", 0, step, f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.StepFailed(ctx, j.ID, "w", 0, step, "throttled", f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.RetryJob(ctx, j.ID, "w", f.now, "throttled", f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "w", f.tick()); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("complete after retry: %v, want ErrLeaseLost", err)
	}
	f.claim("w")
	f.run(j.ID, "w", []string{step}, false, 0)
	if err := f.db.CompleteJob(ctx, j.ID, "w", f.tick()); err != nil {
		t.Fatal(err)
	}
	got := f.job(j.ID)
	if got.State != workflow.JobSucceeded || got.Attempts != 2 || got.LastError != "" {
		t.Errorf("job after completion = %+v", got)
	}
	if ss := stateOfSteps(f.steps(j.ID)); !slices.Equal(ss, []string{step + ":done:2"}) {
		t.Errorf("steps = %q", ss)
	}
	audit := f.clusterAudit()
	if len(audit) != 2 || !strings.HasPrefix(audit[0], "scheduler.enqueue admin1@example.test job 1: reconcile the scheduler config of "+testClusterARN+"; classes changed") ||
		!strings.HasPrefix(audit[1], "scheduler.succeeded provisioner job 1, attempt 2: created: ") {
		t.Errorf("cluster audit = %q", audit)
	}
	// Finished: a new one may be queued.
	j2, err := f.db.EnqueueScheduler(ctx, testClusterARN, admin, "", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	f.claim("w")
	if err := f.db.FailJob(ctx, j2.ID, "w", "AccessDeniedException: no", f.tick()); err != nil {
		t.Fatal(err)
	}
	if got := f.job(j2.ID); got.State != workflow.JobFailed || got.LastError != "AccessDeniedException: no" {
		t.Errorf("failed job = %+v", got)
	}
	audit = f.clusterAudit()
	// j2.ID, not 2: a PostgreSQL sequence keeps no gapless ids.
	if last := audit[len(audit)-1]; last != fmt.Sprintf("scheduler.failed provisioner job %d, attempt 1: AccessDeniedException: no", j2.ID) {
		t.Errorf("last cluster event = %q", last)
	}
	if js, _ := f.db.ClusterJobs(ctx, workflow.JobScheduler, 10); len(js) != 2 || js[0].ID != j2.ID {
		t.Errorf("ClusterJobs = %+v, want newest first", js)
	}
	f.verifyAudit()
}

func TestSchedulerDryRunIsAuditedAsSuch(t *testing.T) {
	f := newFixture(t, 1)
	j, err := f.db.EnqueueScheduler(t.Context(), testClusterARN, f.admins[0], "", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	f.claim("w")
	f.run(j.ID, "w", []string{"scheduler config x"}, true, 0)
	if err := f.db.CompleteJob(t.Context(), j.ID, "w", f.tick()); err != nil {
		t.Fatal(err)
	}
	audit := f.clusterAudit()
	if !strings.HasPrefix(audit[len(audit)-1], "scheduler.dry_run provisioner") {
		t.Errorf("cluster audit = %q", audit)
	}
}

// TestClusterJobsTableRules: the table itself refuses a cluster job with a
// connection, a connection job without one, and a second open cluster job
// written behind the store's back.
func TestClusterJobsTableRules(t *testing.T) {
	f := newFixture(t, 1)
	conn, _ := f.approved("red")
	const cols = `INSERT INTO jobs (connection_id, cluster, kind, version, state, not_before, created_at, updated_at) VALUES `
	for _, row := range []string{
		fmt.Sprintf(`(%d, '', 'scheduler', 1, 'succeeded', 'x', 'x', 'x')`, conn.ID), // a scheduler job of a connection
		`(NULL, 'arn', 'provision', 0, 'succeeded', 'x', 'x', 'x')`,                  // a connection kind without a connection
		`(NULL, '', 'scheduler', 0, 'succeeded', 'x', 'x', 'x')`,                     // a cluster job naming no cluster
		`(NULL, 'arn', 'scheduler', 3, 'succeeded', 'x', 'x', 'x')`,                  // a cluster job with a version
		`(NULL, 'arn', 'frobnicate', 0, 'succeeded', 'x', 'x', 'x')`,                 // an unknown kind
	} {
		if _, err := f.raw.ExecContext(t.Context(), cols+row); err == nil || !strings.Contains(strings.ToUpper(err.Error()), "CHECK") {
			t.Errorf("insert %s: %v, want a CHECK failure", row, err)
		}
	}
	if _, err := f.raw.ExecContext(t.Context(), cols+`(NULL, 'arn', 'scheduler', 0, 'queued', 'x', 'x', 'x'), (NULL, 'arn', 'scheduler', 0, 'running', 'x', 'x', 'x')`); err == nil ||
		!store.IsUniqueViolation(err) {
		t.Errorf("two open scheduler jobs: %v, want a UNIQUE failure", err)
	}
}

// TestClusterJobsMigrationKeepsJobs puts jobs with steps and AWS resources
// in the schema before 00010, migrates, and finds every row as it was, the
// foreign keys intact and enforced, and every index of the table rebuilt.
func TestClusterJobsMigrationKeepsJobs(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, emptyDSN(t, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.MigrateTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, db: db, raw: db.RawSQL(), now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC),
		admins: []workflow.Actor{{ID: 1, Email: "owner@example.test"}}}
	// The rows of two approved connections as schema 9 holds them, written
	// directly: this binary's store reads columns later migrations add.
	const ts = "2025-03-01T09:00:00.000000000Z"
	for _, s := range []string{
		`INSERT INTO users (id, issuer, subject, email, first_login_at, last_login_at) VALUES (1, 'i', 'owner', 'owner@example.test', '` + ts + `', '` + ts + `')`,
		`INSERT INTO connections (id, team, state, cluster_name, current_version, approved_version, requester_id, created_at, updated_at)
			VALUES (1, 'red', 'approved', 'shared-hp', 1, 1, 1, '` + ts + `', '` + ts + `'), (2, 'blue', 'approved', 'shared-hp', 1, 1, 1, '` + ts + `', '` + ts + `')`,
		`INSERT INTO contract_versions (connection_id, version, body, hash, author_id, created_at) VALUES (1, 1, '{}', 'h1', 1, '` + ts + `'), (2, 1, '{}', 'h2', 1, '` + ts + `')`,
		`INSERT INTO jobs (id, connection_id, kind, version, plan_hash, state, not_before, created_at, updated_at)
			VALUES (1, 1, 'provision', 1, 'p1', 'queued', '` + ts + `', '` + ts + `', '` + ts + `'), (2, 2, 'provision', 1, 'p2', 'queued', '` + ts + `', '` + ts + `', '` + ts + `')`,
	} {
		if _, err := f.raw.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Steps and an AWS resource on job 1, written as the worker does; job 1
	// running under a lease, job 2 queued.
	for _, s := range []string{
		`UPDATE connections SET state = 'provisioning' WHERE id = 1`,
		`UPDATE jobs SET state = 'running', lease_owner = 'w', lease_until = '2999-01-01T00:00:00.000000000Z', attempts = 2, steps = 2, applied_plan_hash = 'h' WHERE id = 1`,
		`INSERT INTO job_steps (job_id, seq, name, state, outcome, detail, attempts, started_at, finished_at) VALUES
			(1, 0, 'ComputeQuota red', 'done', 'created', 'arn:q', 1, 's', 'f'), (1, 1, 'Namespace hyperpod-ns-red', 'running', '', '', 2, 's', '')`,
		`INSERT INTO aws_resources (connection_id, kind, name, resource_id, arn, version, action, job_id, updated_at) VALUES (1, 'ComputeQuota', 'red', 'q-1', 'arn:q', 1, 'created', 1, 'x')`,
	} {
		if _, err := f.raw.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	syncSequences(t, f.raw)
	dump := func(q string) string {
		rows, err := f.raw.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		return strings.Join(out, "\n")
	}
	const jobsQ = `SELECT id, connection_id, kind, version, plan_hash, applied_plan_hash, state, attempts, steps, lease_owner, lease_until,
		not_before, last_error, dry_run, created_at, updated_at FROM jobs ORDER BY id`
	const stepsQ = `SELECT * FROM job_steps ORDER BY job_id, seq`
	const awsQ = `SELECT * FROM aws_resources`
	before := []string{dump(jobsQ), dump(stepsQ), dump(awsQ)}
	if before[1] == "" || before[2] == "" {
		t.Fatal("no steps or resources to carry over")
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over existing jobs: %v", err)
	}
	after := []string{dump(jobsQ), dump(stepsQ), dump(awsQ)}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("rows changed by the rebuild:\nbefore\n%s\nafter\n%s", before[i], after[i])
		}
	}
	if v := dump(foreignKeyCheck()); v != "" {
		t.Errorf("foreign key violations after the rebuild: %s", v)
	}
	if v := dump(tableCount("jobs_old")); v != "0" {
		t.Error("the copy of the old table is left behind")
	}
	idx := dump(indexNames("jobs"))
	if want := "jobs_cluster\njobs_connection\njobs_one_open\njobs_one_open_cluster\njobs_queued\njobs_running"; idx != want {
		t.Errorf("indexes of jobs = %q, want %q", idx, want)
	}
	// The steps and resources still reference the new table, enforced.
	if _, err := f.raw.ExecContext(ctx, `DELETE FROM jobs WHERE id = 1`); err == nil || !strings.Contains(strings.ToUpper(err.Error()), "FOREIGN KEY") {
		t.Errorf("deleting a job with steps: %v, want a foreign key failure", err)
	}
	if _, err := f.raw.ExecContext(ctx, `INSERT INTO job_steps (job_id, seq, name, state) VALUES (99, 0, 'x', 'pending')`); err == nil {
		t.Error("a step of a job that does not exist was accepted")
	}
	// The carried-over jobs work: the running one completes under its lease.
	j := f.job(1)
	if j.State != workflow.JobRunning || j.LeaseOwner != "w" || j.Attempts != 2 || j.ConnectionID != 1 || j.Cluster != "" {
		t.Errorf("job 1 after the migration = %+v", j)
	}
	if err := f.db.StepFinished(ctx, 1, "w", 1, "Namespace hyperpod-ns-red", "created", "", f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.CompleteJob(ctx, 1, "w", f.tick()); err != nil {
		t.Errorf("completing a carried-over job: %v", err)
	}
	// And the one open-job rule of connections still holds.
	if _, err := f.db.EnqueueProvisioning(ctx, 2, f.admins[0], "", f.tick()); err == nil {
		t.Error("a second open provisioning job was queued after the rebuild")
	}

	// Down again: the connections' jobs stay, the cluster jobs and their
	// steps go (the old table cannot hold them).
	sj, err := f.db.EnqueueScheduler(ctx, testClusterARN, f.admins[0], "", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, `INSERT INTO job_steps (job_id, seq, name, state) VALUES (?, 0, 'x', 'pending')`, sj.ID); err != nil {
		t.Fatal(err)
	}
	stepsBefore := dump(`SELECT * FROM job_steps WHERE job_id != ` + fmt.Sprint(sj.ID) + ` ORDER BY job_id, seq`)
	if err := db.MigrateDownTo(ctx, 9); err != nil {
		t.Fatalf("down to 9: %v", err)
	}
	if v := dump(`SELECT count(*) FROM jobs`); v != "2" {
		t.Errorf("%s jobs after the down migration, want the 2 connection jobs", v)
	}
	if v := dump(stepsQ); v != stepsBefore {
		t.Errorf("steps after the down migration:\n%s\nwant\n%s", v, stepsBefore)
	}
	if v := dump(foreignKeyCheck()); v != "" {
		t.Errorf("foreign key violations after the down migration: %s", v)
	}
}
