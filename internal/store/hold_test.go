package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func (f *fixture) outbox(connID int64) []string {
	f.t.Helper()
	rows, err := f.raw.QueryContext(f.t.Context(), `SELECT kind || ' ' || recipients FROM outbox WHERE connection_id = ? ORDER BY id`, connID)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) conn(id int64) store.Connection {
	f.t.Helper()
	c, err := f.db.Connection(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// TestHoldSteps: a proposal waits in the admins' hold queue; an admin's
// confirmation records the hold with who and why and queues a hold job
// with stopPolicy Hold, in the transaction that records it, with its audit
// events and notices; the team's owner cannot decide it; a refused step
// writes nothing.
func TestHoldSteps(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	conn := f.active("red")
	reviewer := f.user("reviewer")
	if _, _, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepConfirm, f.admins[0], false, "no", f.tick()); err == nil {
		t.Fatal("a hold was confirmed with nothing proposed")
	}
	c, err := f.db.ProposeHold(ctx, conn.ID, reviewer, "idle for 90 days", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if c.Hold != workflow.HoldProposed || c.HoldBy != reviewer.Email || c.HoldReason != "idle for 90 days" || c.HoldAt.IsZero() {
		t.Errorf("after the proposal: %+v", c)
	}
	q, err := f.db.HoldQueue(ctx, 10)
	if err != nil || len(q) != 1 || q[0].ID != conn.ID {
		t.Errorf("HoldQueue = %+v, %v", q, err)
	}
	if len(f.jobs(conn.ID)) != 1 {
		t.Error("a proposal queued a job")
	}

	// The owner filed the request: they do not decide its hold.
	before := f.snapshot()
	if _, _, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepDecline, f.owner, false, "mine", f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
		t.Errorf("the owner's decline: %v, want ErrNotIndependent", err)
	}
	f.assertUnchanged(before, "the owner's decline")

	c, jobID, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepConfirm, f.admins[1], false, "confirmed", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if c.Hold != workflow.HoldOn || c.HoldBy != f.admins[1].Email || c.State != workflow.StateActive {
		t.Errorf("after the confirmation: %+v", c)
	}
	j := f.job(jobID)
	if j.Kind != workflow.JobHold || j.StopPolicy != workflow.StopHold || j.State != workflow.JobQueued || j.Version != conn.ApprovedVersion {
		t.Errorf("hold job = %+v", j)
	}
	if q, _ := f.db.HoldQueue(ctx, 10); len(q) != 0 {
		t.Errorf("a confirmed hold is still in the queue: %+v", q)
	}
	acts := strings.Join(f.auditActions(conn.ID), " ")
	if !strings.Contains(acts, "hold.propose hold.confirm") {
		t.Errorf("audit = %s", acts)
	}
	out := strings.Join(f.outbox(conn.ID), ", ")
	for _, want := range []string{"hold.proposed team-owners", "hold.proposed admins", "hold.confirm team-owners"} {
		if !strings.Contains(out, want) {
			t.Errorf("outbox lacks %q: %s", want, out)
		}
	}

	// The job runs: its start and success are audited, the hold stays.
	f.runJob("w", false, "stopPolicy Hold on LocalQueue x/q")
	if j := f.job(jobID); j.State != workflow.JobSucceeded {
		t.Errorf("hold job = %s", j.State)
	}
	acts = strings.Join(f.auditActions(conn.ID), " ")
	if !strings.Contains(acts, "hold.start hold.applied") {
		t.Errorf("audit = %s", acts)
	}
	// Release goes back to none with a None job; a revocation later
	// cancels a hold job still queued.
	c, jobID, err = f.db.DecideHold(ctx, conn.ID, workflow.HoldStepRelease, f.admins[0], false, "back in use", f.tick())
	if err != nil || c.Hold != workflow.HoldNone || f.job(jobID).StopPolicy != workflow.StopNone {
		t.Fatalf("release: %+v, %v", c, err)
	}
	f.revoke(conn.ID, "done")
	if j := f.job(jobID); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "revoked") {
		t.Errorf("hold job after the revocation = %s %q", j.State, j.LastError)
	}
	if _, err := f.db.ProposeHold(ctx, conn.ID, reviewer, "again", f.tick()); !errors.Is(err, workflow.ErrHoldNotLive) {
		t.Errorf("a proposal on a revoking connection: %v", err)
	}
	f.verifyAudit()
}

// TestHoldSupersedes: a newer hold step fails the unfinished hold job
// (which would apply a stopPolicy the hold no longer says), and its job is
// due only when the running one's lease expires.
func TestHoldSupersedes(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	if _, err := f.db.ProposeHold(ctx, conn.ID, workflow.SystemActor, "end date", f.tick()); err != nil {
		t.Fatal(err)
	}
	_, first, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepConfirm, f.admins[0], false, "ok", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	running := f.claim("w")
	if running.ID != first {
		t.Fatalf("claimed job %d, want %d", running.ID, first)
	}
	_, second, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepDrain, f.admins[0], true, "evict", f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if j := f.job(first); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "superseded") {
		t.Errorf("the superseded job = %s %q", j.State, j.LastError)
	}
	j := f.job(second)
	if j.StopPolicy != workflow.StopHoldAndDrain || !j.NotBefore.Equal(running.LeaseUntil) {
		t.Errorf("the new job = %s due %s, want HoldAndDrain due at the old lease's end %s", j.StopPolicy, j.NotBefore, running.LeaseUntil)
	}
	if !strings.Contains(strings.Join(f.auditActions(conn.ID), " "), "hold.cancelled") {
		t.Error("the superseded job is not audited")
	}
}

// TestHoldConfirmRace: two admins confirm the same proposal at once; the
// rule is checked inside the transaction that records it, so exactly one
// wins, one job is queued, and the other is refused.
func TestHoldConfirmRace(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	conn := f.active("red")
	if _, err := f.db.ProposeHold(ctx, conn.ID, workflow.SystemActor, "end date", f.tick()); err != nil {
		t.Fatal(err)
	}
	now := f.tick()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, _, errs[i] = f.db.DecideHold(ctx, conn.ID, workflow.HoldStepConfirm, f.admins[i], false, fmt.Sprint("admin ", i), now)
		})
	}
	wg.Wait()
	var won, refused int
	for _, err := range errs {
		var he *workflow.HoldError
		switch {
		case err == nil:
			won++
		case errors.As(err, &he):
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if won != 1 || refused != 1 {
		t.Errorf("won %d, refused %d; want one each (%v)", won, refused, errs)
	}
	n := 0
	for _, j := range f.jobs(conn.ID) {
		if j.Kind == workflow.JobHold {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d hold jobs, want 1", n)
	}
}

// TestEndDateHolds is the end-date rule over the store with a test clock:
// the 14-day and 3-day notices and the proposal once the date has passed,
// each once (a second pass, as after a restart, does nothing), and a
// declined proposal is not proposed again for the same end date.
func TestEndDateHolds(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	c := contract("red", "hyperpod-ns-red", "")
	c.EndDate = "2025-03-20"
	conn := f.submitted(c)
	f.approve(conn.ID, f.admins[0], 1)
	f.runJob("provisioner", false, "Namespace x")
	other := f.active("blue") // the example's end date is far away

	day := func(d int) time.Time { return time.Date(2025, 3, d, 12, 0, 0, 0, time.UTC) }
	pass := func(at time.Time, want store.EndDateReport) {
		t.Helper()
		for i := range 2 { // the second pass finds everything done
			got, err := f.db.EndDateHolds(ctx, at)
			if i == 1 {
				want = store.EndDateReport{}
			}
			if err != nil || got != want {
				t.Fatalf("EndDateHolds(%s) pass %d = %+v, %v; want %+v", at.Format(time.DateOnly), i+1, got, err, want)
			}
		}
	}
	pass(day(5), store.EndDateReport{})              // 15 days left
	pass(day(6), store.EndDateReport{Notices: 1})    // 14
	pass(day(10), store.EndDateReport{})             // 10: the 14-day notice is done
	pass(day(17), store.EndDateReport{Notices: 1})   // 3
	pass(day(20), store.EndDateReport{})             // the last day
	pass(day(21), store.EndDateReport{Proposals: 1}) // passed
	got := f.conn(conn.ID)
	if got.Hold != workflow.HoldProposed || got.HoldBy != workflow.SystemActor.Email || !strings.Contains(got.HoldReason, "2025-03-20") {
		t.Errorf("after the end date: %+v", got)
	}
	if _, _, err := f.db.DecideHold(ctx, conn.ID, workflow.HoldStepDecline, f.admins[0], false, "renewal on its way", day(21)); err != nil {
		t.Fatal(err)
	}
	pass(day(22), store.EndDateReport{})
	if h := f.conn(conn.ID).Hold; h != workflow.HoldNone {
		t.Errorf("the declined proposal came back: %q", h)
	}
	out := strings.Join(f.outbox(conn.ID), ", ")
	if strings.Count(out, "end_date.coming team-owners") != 2 || !strings.Contains(out, "hold.proposed admins") {
		t.Errorf("outbox = %s", out)
	}
	if o := strings.Join(f.outbox(other.ID), ", "); strings.Contains(o, "end_date") || strings.Contains(o, "hold") || f.conn(other.ID).Hold != workflow.HoldNone {
		t.Error("the other connection was touched")
	}
	f.verifyAudit()
}

// TestHoldsMigrationKeepsJobs puts jobs with steps and AWS resources in the
// schema before 00018, migrates, and finds every row as it was, the foreign
// keys intact, every index rebuilt and hold jobs accepted; down again, the
// hold jobs go and the others stay.
func TestHoldsMigrationKeepsJobs(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, emptyDSN(t, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.MigrateTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	raw := db.RawSQL()
	const ts = "2025-03-01T09:00:00.000000000Z"
	for _, s := range []string{
		`INSERT INTO users (id, issuer, subject, email, first_login_at, last_login_at) VALUES (1, 'i', 'owner', 'owner@example.test', '` + ts + `', '` + ts + `')`,
		`INSERT INTO connections (id, team, state, cluster_name, current_version, approved_version, requester_id, created_at, updated_at)
			VALUES (1, 'red', 'active', 'shared-hp', 2, 1, 1, '` + ts + `', '` + ts + `')`,
		`INSERT INTO contract_versions (connection_id, version, body, hash, author_id, created_at) VALUES (1, 1, '{}', 'h1', 1, '` + ts + `'), (1, 2, '{}', 'h2', 1, '` + ts + `')`,
		`INSERT INTO jobs (id, connection_id, kind, version, plan_hash, state, not_before, created_at, updated_at, from_version)
			VALUES (1, 1, 'provision', 1, 'p1', 'succeeded', '` + ts + `', '` + ts + `', '` + ts + `', 0),
			       (2, 1, 'amend', 2, 'p2', 'running', '` + ts + `', '` + ts + `', '` + ts + `', 1)`,
		`INSERT INTO jobs (id, cluster, kind, version, state, not_before, created_at, updated_at) VALUES (3, 'arn', 'scheduler', 0, 'queued', '` + ts + `', '` + ts + `', '` + ts + `')`,
		`INSERT INTO job_steps (job_id, seq, name, state, outcome, detail, attempts, started_at, finished_at) VALUES
			(1, 0, 'ComputeQuota red', 'done', 'created', 'arn:q', 1, 's', 'f'), (2, 0, 'Namespace x', 'running', '', '', 2, 's', '')`,
		`INSERT INTO aws_resources (connection_id, kind, name, resource_id, arn, version, action, job_id, updated_at) VALUES (1, 'ComputeQuota', 'red', 'q-1', 'arn:q', 1, 'created', 1, 'x')`,
	} {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	syncSequences(t, raw)
	dump := func(q string) string {
		rows, err := raw.QueryContext(ctx, q)
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
	const jobsQ = `SELECT id, connection_id, cluster, kind, version, plan_hash, applied_plan_hash, state, attempts, steps, lease_owner, lease_until,
		not_before, last_error, dry_run, created_at, updated_at, from_version FROM jobs ORDER BY id`
	queries := []string{jobsQ, `SELECT * FROM job_steps ORDER BY job_id, seq`, `SELECT * FROM aws_resources`}
	var before []string
	for _, q := range queries {
		before = append(before, dump(q))
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over existing jobs: %v", err)
	}
	for i, q := range queries {
		if got := dump(q); got != before[i] {
			t.Errorf("rows changed by the rebuild:\nbefore\n%s\nafter\n%s", before[i], got)
		}
	}
	if v := dump(foreignKeyCheck()); v != "" {
		t.Errorf("foreign key violations after the rebuild: %s", v)
	}
	idx := dump(indexNames("jobs"))
	if want := "jobs_cluster\njobs_connection\njobs_one_open\njobs_one_open_cluster\njobs_queued\njobs_running"; idx != want {
		t.Errorf("indexes of jobs = %q, want %q", idx, want)
	}
	if _, err := raw.ExecContext(ctx, `DELETE FROM jobs WHERE id = 1`); err == nil || !strings.Contains(strings.ToUpper(err.Error()), "FOREIGN KEY") {
		t.Errorf("deleting a job with steps: %v, want a foreign key failure", err)
	}
	// The new kind, with its stopPolicy; never without one, nor another
	// kind with one; one open per connection.
	ins := `INSERT INTO jobs (connection_id, kind, version, stop_policy, state, not_before, created_at, updated_at) VALUES (1, ?, 1, ?, 'queued', 'x', 'x', 'x')`
	if _, err := raw.ExecContext(ctx, ins, "hold", "Hold"); err != nil {
		t.Fatalf("a hold job: %v", err)
	}
	for _, bad := range [][2]string{{"hold", ""}, {"reapply", "Hold"}, {"hold", "Paused"}, {"hold", "None"}} {
		if _, err := raw.ExecContext(ctx, ins, bad[0], bad[1]); err == nil {
			t.Errorf("job %v accepted", bad)
		}
	}
	if v := dump(`SELECT hold || '|' || hold_by || '|' || hold_by_id FROM connections`); v != "||0" {
		t.Errorf("hold of a carried-over connection = %q", v)
	}
	if _, err := raw.ExecContext(ctx, `UPDATE connections SET hold = 'paused'`); err == nil {
		t.Error("an unknown hold state was accepted")
	}

	if err := db.MigrateDownTo(ctx, 15); err != nil {
		t.Fatalf("down to 15: %v", err)
	}
	if got := dump(jobsQ); got != before[0] {
		t.Errorf("jobs after the down migration:\n%s\nwant\n%s", got, before[0])
	}
	if v := dump(foreignKeyCheck()); v != "" {
		t.Errorf("foreign key violations after the down migration: %s", v)
	}
}
