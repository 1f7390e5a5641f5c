package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

const lease = time.Minute

// approved creates, submits and approves a connection (one approval) and
// returns it with the job the approval queued.
func (f *fixture) approved(team string) (store.Connection, workflow.Job) {
	f.t.Helper()
	conn := f.submitted(contract(team, "hyperpod-ns-"+team, ""))
	conn, _ = f.approve(conn.ID, f.admins[0], 1)
	jobs := f.jobs(conn.ID)
	if len(jobs) != 1 {
		f.t.Fatalf("approval queued %d jobs, want 1", len(jobs))
	}
	return conn, jobs[0]
}

func (f *fixture) jobs(connID int64) []workflow.Job {
	f.t.Helper()
	js, err := f.db.JobsFor(f.t.Context(), connID)
	if err != nil {
		f.t.Fatalf("JobsFor(%d): %v", connID, err)
	}
	return js
}

func (f *fixture) job(id int64) workflow.Job {
	f.t.Helper()
	j, err := f.db.Job(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("Job(%d): %v", id, err)
	}
	return j
}

func (f *fixture) steps(jobID int64) []workflow.JobStep {
	f.t.Helper()
	s, err := f.db.JobSteps(f.t.Context(), jobID)
	if err != nil {
		f.t.Fatalf("JobSteps(%d): %v", jobID, err)
	}
	return s
}

func (f *fixture) state(connID int64) workflow.State {
	f.t.Helper()
	c, err := f.db.Connection(f.t.Context(), connID)
	if err != nil {
		f.t.Fatalf("Connection(%d): %v", connID, err)
	}
	return c.State
}

// claim claims the next job as owner at f's clock and expects one.
func (f *fixture) claim(owner string) workflow.Job {
	f.t.Helper()
	j, ok, err := f.db.ClaimJob(f.t.Context(), owner, f.tick(), lease)
	if err != nil || !ok {
		f.t.Fatalf("ClaimJob(%s) = %v, %v; want a job", owner, ok, err)
	}
	return j
}

// stateOfSteps is "name:state:attempts" per step, in order.
func stateOfSteps(ss []workflow.JobStep) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s:%s:%d", s.Name, s.State, s.Attempts))
	}
	return out
}

func (f *fixture) verifyAudit() {
	f.t.Helper()
	if n, brk, err := f.db.VerifyAudit(f.t.Context()); err != nil || brk != nil {
		f.t.Errorf("VerifyAudit = %d, %+v, %v; want an intact chain", n, brk, err)
	}
}

func TestApproveQueuesOneJob(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()

	t.Run("completing approval", func(t *testing.T) {
		conn := f.submitted(workflow.ExampleContract())
		at := f.tick()
		if _, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, at); err != nil {
			t.Fatal(err)
		}
		js := f.jobs(conn.ID)
		if len(js) != 1 {
			t.Fatalf("jobs = %+v, want one", js)
		}
		j := js[0]
		if j.Kind != workflow.JobProvision || j.State != workflow.JobQueued || j.Version != 1 || j.Attempts != 0 ||
			j.PlanHash != f.pin(conn.ID).PlanHash || !j.NotBefore.Equal(at) || !j.CreatedAt.Equal(at) || !j.LeaseUntil.IsZero() {
			t.Errorf("job = %+v, want a provision job queued at %s for version 1 pinned to the plan", j, at)
		}
	})

	t.Run("partial approval queues nothing", func(t *testing.T) {
		c := contract("blue", "ns-blue", "")
		c.DataClassification = workflow.DataRestricted
		conn := f.submitted(c)
		f.approve(conn.ID, f.admins[0], 2)
		if js := f.jobs(conn.ID); len(js) != 0 {
			t.Errorf("jobs after the first of two approvals = %+v, want none", js)
		}
		f.approve(conn.ID, f.admins[1], 2)
		if js := f.jobs(conn.ID); len(js) != 1 || js[0].State != workflow.JobQueued {
			t.Errorf("jobs after the second approval = %+v, want one queued", js)
		}
	})

	t.Run("refused approval queues nothing", func(t *testing.T) {
		big := workflow.ExampleContract()
		big.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 100000}}
		conn := f.submitted(big)
		if _, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err == nil {
			t.Fatal("Approve with a failing capacity check succeeded")
		}
		if js := f.jobs(conn.ID); len(js) != 0 {
			t.Errorf("jobs = %+v, want none", js)
		}
	})

	t.Run("the job and the approval commit together", func(t *testing.T) {
		conn := f.submitted(contract("green", "ns-green", ""))
		// An open job the approval's own would collide with: the approval
		// must roll back entirely.
		if err := f.db.ExecForTest(ctx, fmt.Sprintf(`INSERT INTO jobs (connection_id, kind, version, state, not_before, created_at, updated_at)
VALUES (%d, 'provision', 1, 'queued', '2025-03-01T09:00:00.000000000Z', '2025-03-01T09:00:00.000000000Z', '2025-03-01T09:00:00.000000000Z')`, conn.ID)); err != nil {
			t.Fatal(err)
		}
		before := f.snapshot()
		_, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick())
		if !errors.Is(err, store.ErrJobOpen) {
			t.Errorf("Approve = %v, want ErrJobOpen", err)
		}
		f.assertUnchanged(before, "an approval whose job could not be queued")
		if n := len(f.jobs(conn.ID)); n != 1 {
			t.Errorf("%d jobs, want only the planted one", n)
		}
	})
}

func TestClaimJobIsExclusive(t *testing.T) {
	const claimers = 8
	f := newFixture(t, 1)
	ctx := t.Context()
	var want []int64
	for _, team := range []string{"red", "blue", "green"} {
		_, j := f.approved(team)
		want = append(want, j.ID)
	}
	at := f.tick()

	got := make([]workflow.Job, claimers)
	oks := make([]bool, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			<-start
			got[i], oks[i], errs[i] = f.db.ClaimJob(ctx, fmt.Sprintf("w%d", i), at, lease)
		})
	}
	close(start)
	wg.Wait()

	var claimed []int64
	for i := range claimers {
		if errs[i] != nil {
			t.Errorf("claimer %d: %v", i, errs[i])
		}
		if !oks[i] {
			continue
		}
		claimed = append(claimed, got[i].ID)
		j := f.job(got[i].ID)
		if j.State != workflow.JobRunning || j.LeaseOwner != fmt.Sprintf("w%d", i) || j.Attempts != 1 || !j.LeaseUntil.Equal(at.Add(lease)) {
			t.Errorf("claimer %d: job %+v, want running, leased to w%d until %s, attempt 1", i, j, i, at.Add(lease))
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, want) {
		t.Errorf("claimed jobs %v, want each of %v exactly once", claimed, want)
	}
	if _, ok, err := f.db.ClaimJob(ctx, "late", at, lease); ok || err != nil {
		t.Errorf("a ninth claim = %v, %v; want nothing", ok, err)
	}

	// One job, eight claimers, a few rounds: a race shows up in some.
	for round := range 10 {
		_, j := f.approved(fmt.Sprintf("t%d", round))
		at := f.tick()
		wins := make([]int64, claimers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Go(func() {
				<-start
				got, ok, err := f.db.ClaimJob(ctx, fmt.Sprintf("w%d", i), at, lease)
				if err != nil {
					t.Errorf("round %d, claimer %d: %v", round, i, err)
				}
				if ok {
					wins[i] = got.ID
				}
			})
		}
		close(start)
		wg.Wait()
		if won := slices.DeleteFunc(wins, func(id int64) bool { return id == 0 }); !slices.Equal(won, []int64{j.ID}) {
			t.Errorf("round %d: claims %v, want job %d claimed exactly once", round, won, j.ID)
		}
		if got := f.job(j.ID); got.Attempts != 1 {
			t.Errorf("round %d: job attempts %d, want 1", round, got.Attempts)
		}
	}
}

func TestClaimJobOrderAndSchedule(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	_, j1 := f.approved("red")
	_, j2 := f.approved("blue")

	first := f.claim("w1")
	if first.ID != j1.ID {
		t.Fatalf("claimed job %d first, want the oldest, %d", first.ID, j1.ID)
	}
	// A retry later than the other job's due time goes behind it.
	retryAt := f.now.Add(10 * time.Second)
	if err := f.db.RetryJob(ctx, j1.ID, "w1", retryAt, "503: unavailable", f.tick()); err != nil {
		t.Fatal(err)
	}
	j := f.job(j1.ID)
	if j.State != workflow.JobQueued || j.LeaseOwner != "" || !j.LeaseUntil.IsZero() || !j.NotBefore.Equal(retryAt) || j.LastError != "503: unavailable" {
		t.Errorf("after RetryJob: %+v", j)
	}
	if got := f.claim("w2"); got.ID != j2.ID {
		t.Errorf("claimed %d, want %d (job %d is not due)", got.ID, j2.ID, j1.ID)
	}
	if _, ok, err := f.db.ClaimJob(ctx, "w3", retryAt.Add(-time.Nanosecond), lease); ok || err != nil {
		t.Errorf("claim before the retry is due = %v, %v; want nothing", ok, err)
	}
	got, ok, err := f.db.ClaimJob(ctx, "w3", retryAt, lease)
	if err != nil || !ok || got.ID != j1.ID || got.Attempts != 2 || got.LastError != "503: unavailable" || got.PreviousOwner != "" {
		t.Errorf("claim when due = %+v, %v, %v; want job %d, attempt 2, with its last error", got, ok, err, j1.ID)
	}

	if _, _, err := f.db.ClaimJob(ctx, "", f.now, lease); err == nil {
		t.Error("ClaimJob without an owner succeeded")
	}
}

func TestLeaseExpiryAndLostLease(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	a := f.claim("worker-a")
	t0 := f.now
	if err := f.db.StartJob(ctx, j.ID, "worker-a", "plan1", []string{"Namespace x", "ResourceQuota x/q"}, false, f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.ExtendLease(ctx, j.ID, "worker-a", t0.Add(30*time.Second), lease); err != nil {
		t.Fatal(err)
	}
	if got := f.job(j.ID).LeaseUntil; !got.Equal(t0.Add(30*time.Second + lease)) {
		t.Errorf("lease until %s after ExtendLease, want %s", got, t0.Add(30*time.Second+lease))
	}
	// StartStep extends the lease too, and marks the step running, in one
	// transaction.
	if err := f.db.StartStep(ctx, j.ID, "worker-a", 0, "Namespace x", t0.Add(20*time.Second), lease); err != nil {
		t.Fatal(err)
	}
	if got := f.job(j.ID).LeaseUntil; !got.Equal(t0.Add(20*time.Second + lease)) {
		t.Errorf("lease until %s after StartStep, want %s", got, t0.Add(20*time.Second+lease))
	}
	if ss := f.steps(j.ID); ss[0].State != workflow.StepRunning || ss[0].Attempts != 1 || !ss[0].StartedAt.Equal(t0.Add(20*time.Second)) || ss[1].State != workflow.StepPending {
		t.Errorf("steps after StartStep of step 0: %+v; want step 0 running (attempt 1), step 1 pending", ss)
	}
	if err := f.db.ExtendLease(ctx, j.ID, "worker-a", t0.Add(30*time.Second), lease); err != nil {
		t.Fatal(err)
	}

	if _, ok, _ := f.db.ClaimJob(ctx, "worker-b", t0.Add(lease+29*time.Second), lease); ok {
		t.Fatal("worker-b claimed a job whose lease has not expired")
	}
	expiry := t0.Add(30*time.Second + lease)
	b, ok, err := f.db.ClaimJob(ctx, "worker-b", expiry, lease)
	if err != nil || !ok || b.ID != a.ID || b.Attempts != 2 || b.PreviousOwner != "worker-a" || b.LeaseOwner != "worker-b" {
		t.Fatalf("claim after expiry = %+v, %v, %v; want job %d taken over from worker-a at attempt 2", b, ok, err, a.ID)
	}

	// worker-a wakes up: every write it tries is refused and changes nothing.
	before := f.snapshot()
	stepsBefore := stateOfSteps(f.steps(j.ID))
	now := expiry.Add(time.Second)
	for name, write := range map[string]func() error{
		"ExtendLease":  func() error { return f.db.ExtendLease(ctx, j.ID, "worker-a", now, lease) },
		"StartJob":     func() error { return f.db.StartJob(ctx, j.ID, "worker-a", "p", []string{"x"}, false, now) },
		"StepStarted":  func() error { return f.db.StepStarted(ctx, j.ID, "worker-a", 0, "Namespace x", now) },
		"StartStep":    func() error { return f.db.StartStep(ctx, j.ID, "worker-a", 1, "ResourceQuota x/q", now, lease) },
		"StepFinished": func() error { return f.db.StepFinished(ctx, j.ID, "worker-a", 0, "Namespace x", "created", "", now) },
		"StepsDone": func() error {
			return f.db.StepsDone(ctx, j.ID, "worker-a", []workflow.JobStep{{Seq: 1, Name: "ResourceQuota x/q", Outcome: "unchanged"}}, now, lease)
		},
		"StepFailed":  func() error { return f.db.StepFailed(ctx, j.ID, "worker-a", 0, "Namespace x", "boom", now) },
		"RetryJob":    func() error { return f.db.RetryJob(ctx, j.ID, "worker-a", now, "boom", now) },
		"FailJob":     func() error { return f.db.FailJob(ctx, j.ID, "worker-a", "boom", now) },
		"CompleteJob": func() error { return f.db.CompleteJob(ctx, j.ID, "worker-a", now) },
	} {
		if err := write(); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s by the worker that lost the lease = %v, want ErrLeaseLost", name, err)
		}
	}
	f.assertUnchanged(before, "writes under a lost lease")
	if got := stateOfSteps(f.steps(j.ID)); !slices.Equal(got, stepsBefore) {
		t.Errorf("steps changed under a lost lease: %v, was %v", got, stepsBefore)
	}
	if got := f.job(j.ID); got.LeaseOwner != "worker-b" || got.State != workflow.JobRunning {
		t.Errorf("job after the refused writes: %+v", got)
	}
	if f.state(conn.ID) != workflow.StateProvisioning {
		t.Errorf("connection %s, want provisioning", f.state(conn.ID))
	}
	if err := f.db.StepStarted(ctx, 9999, "worker-a", 0, "x", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StepStarted on a missing job = %v, want ErrNotFound", err)
	}
}

func TestStepsAreUpdatedNotDuplicated(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	_, j := f.approved("red")
	names := []string{"Namespace ns", "ResourceQuota ns/q", "Role ns/r"}

	f.claim("a")
	if err := f.db.StartJob(ctx, j.ID, "a", "plan1", names, false, f.tick()); err != nil {
		t.Fatal(err)
	}
	want := []string{"Namespace ns:pending:0", "ResourceQuota ns/q:pending:0", "Role ns/r:pending:0"}
	if got := stateOfSteps(f.steps(j.ID)); !slices.Equal(got, want) {
		t.Errorf("after StartJob: %v, want %v", got, want)
	}
	for seq := range 2 {
		if err := f.db.StepStarted(ctx, j.ID, "a", seq, names[seq], f.tick()); err != nil {
			t.Fatal(err)
		}
		if err := f.db.StepFinished(ctx, j.ID, "a", seq, names[seq], "created", "resourceVersion 1", f.tick()); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.db.StepStarted(ctx, j.ID, "a", 2, names[2], f.tick()); err != nil {
		t.Fatal(err)
	}
	ss := f.steps(j.ID)
	if ss[0].Outcome != "created" || ss[0].Detail != "resourceVersion 1" || ss[0].StartedAt.IsZero() || ss[0].FinishedAt.Before(ss[0].StartedAt) ||
		ss[2].State != workflow.StepRunning || !ss[2].FinishedAt.IsZero() {
		t.Errorf("steps = %+v", ss)
	}

	// The worker dies in step 2; another takes over after the lease.
	f.now = f.now.Add(2 * lease)
	f.claim("b")
	if err := f.db.StartJob(ctx, j.ID, "b", "plan1", names, false, f.tick()); err != nil {
		t.Fatal(err)
	}
	want = []string{"Namespace ns:pending:1", "ResourceQuota ns/q:pending:1", "Role ns/r:pending:1"}
	if got := stateOfSteps(f.steps(j.ID)); !slices.Equal(got, want) {
		t.Errorf("after the second StartJob: %v, want %v (reset to pending, attempts kept)", got, want)
	}
	if err := f.db.StepStarted(ctx, j.ID, "b", 0, names[0], f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.StepFailed(ctx, j.ID, "b", 0, names[0], "Namespace is invalid", f.tick()); err != nil {
		t.Fatal(err)
	}
	ss = f.steps(j.ID)
	if len(ss) != 3 || ss[0].State != workflow.StepFailed || ss[0].Attempts != 2 || ss[0].Outcome != "failed" || ss[0].Detail != "Namespace is invalid" {
		t.Errorf("steps after a failed re-run = %+v", ss)
	}

	// A plan that shrank leaves no stale rows behind.
	if err := f.db.StartJob(ctx, j.ID, "b", "plan2", names[:2], false, f.tick()); err != nil {
		t.Fatal(err)
	}
	if got := f.steps(j.ID); len(got) != 2 {
		t.Errorf("steps after a two-step plan: %v", stateOfSteps(got))
	}
	if got := f.job(j.ID); got.Steps != 2 || got.AppliedPlanHash != "plan2" {
		t.Errorf("job = %+v, want 2 steps of plan2", got)
	}
}

// run claims the job, starts it with steps, and finishes all but skip of
// them (in order).
func (f *fixture) run(jobID int64, owner string, steps []string, dryRun bool, skip int) {
	f.t.Helper()
	ctx := f.t.Context()
	if err := f.db.StartJob(ctx, jobID, owner, "plan", steps, dryRun, f.tick()); err != nil {
		f.t.Fatal(err)
	}
	for seq, name := range steps[:len(steps)-skip] {
		if err := f.db.StepStarted(ctx, jobID, owner, seq, name, f.tick()); err != nil {
			f.t.Fatal(err)
		}
		if err := f.db.StepFinished(ctx, jobID, owner, seq, name, "created", "", f.tick()); err != nil {
			f.t.Fatal(err)
		}
	}
}

func TestStartJobMovesTheConnection(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	f.claim("a")
	f.run(j.ID, "a", []string{"Namespace x"}, false, 1)
	if s := f.state(conn.ID); s != workflow.StateProvisioning {
		t.Errorf("connection %s after StartJob, want provisioning", s)
	}
	// A resumed attempt transitions nothing and audits nothing.
	f.now = f.now.Add(2 * lease)
	f.claim("b")
	f.run(j.ID, "b", []string{"Namespace x"}, false, 1)
	if acts := f.auditActions(conn.ID); !slices.Equal(acts, []string{"connection.create", "connection.submit", "connection.approve", "provisioning.start"}) {
		t.Errorf("audit actions = %v", acts)
	}

	t.Run("revoked while queued", func(t *testing.T) {
		conn, j := f.approved("blue")
		f.transition(conn.ID, workflow.EventRevoke, f.admins[0], "no longer needed")
		f.claim("c")
		before := f.snapshot()
		err := f.db.StartJob(ctx, j.ID, "c", "plan", []string{"Namespace x"}, false, f.tick())
		var te *workflow.TransitionError
		if !errors.As(err, &te) || te.From != workflow.StateRevoking {
			t.Errorf("StartJob = %v, want a TransitionError from revoking", err)
		}
		f.assertUnchanged(before, "a refused StartJob")
		if n := len(f.steps(j.ID)); n != 0 {
			t.Errorf("%d steps recorded by a refused StartJob", n)
		}
	})
}

func TestFailJob(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	f.claim("a")
	f.run(j.ID, "a", []string{"Namespace x", "ResourceQuota x/q"}, false, 1)
	const msg = `provision: apply ResourceQuota x/q: ResourceQuota "q" is invalid: spec.hard: Invalid value`
	if err := f.db.FailJob(ctx, j.ID, "a", msg, f.tick()); err != nil {
		t.Fatal(err)
	}
	got := f.job(j.ID)
	if got.State != workflow.JobFailed || got.LastError != msg || got.LeaseOwner != "" {
		t.Errorf("job = %+v, want failed with the message", got)
	}
	if s := f.state(conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s, want approved again", s)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectID: conn.ID, Action: "provisioning.failed"}, 0, 10)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Reason, msg) || evs[0].Actor != "provisioner" {
		t.Errorf("provisioning.failed events = %+v, %v; want one carrying the message", evs, err)
	}
	f.verifyAudit()
	if _, ok, _ := f.db.ClaimJob(ctx, "b", f.now.Add(time.Hour), lease); ok {
		t.Error("a failed job was claimed again")
	}

	// Trying again is a new job; only one may be open at a time.
	again, err := f.db.EnqueueProvisioning(ctx, conn.ID, f.admins[0], "quota fixed", f.tick())
	if err != nil || again.State != workflow.JobQueued || again.Version != 1 || again.ID == j.ID {
		t.Fatalf("EnqueueProvisioning = %+v, %v", again, err)
	}
	if _, err := f.db.EnqueueProvisioning(ctx, conn.ID, f.admins[0], "twice", f.tick()); !errors.Is(err, store.ErrJobOpen) {
		t.Errorf("second EnqueueProvisioning = %v, want ErrJobOpen", err)
	}
	other := f.submitted(contract("blue", "hyperpod-ns-blue", ""))
	var te *workflow.TransitionError
	if _, err := f.db.EnqueueProvisioning(ctx, other.ID, f.admins[0], "", f.tick()); !errors.As(err, &te) {
		t.Errorf("EnqueueProvisioning of a submitted connection = %v, want a TransitionError", err)
	}
}

func TestCompleteJobReadinessGate(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	steps := []string{"Namespace x", "ResourceQuota x/q", "RoleBinding x/b"}
	f.claim("a")
	f.run(j.ID, "a", steps, false, 1)

	before := f.snapshot()
	err := f.db.CompleteJob(ctx, j.ID, "a", f.tick())
	if !errors.Is(err, store.ErrStepsNotDone) || !strings.Contains(err.Error(), "2 of 3") {
		t.Errorf("CompleteJob with a step not done = %v, want ErrStepsNotDone (2 of 3)", err)
	}
	f.assertUnchanged(before, "a refused CompleteJob")
	// A failed step is not done either.
	if err := f.db.StepFailed(ctx, j.ID, "a", 2, steps[2], "forbidden", f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "a", f.tick()); !errors.Is(err, store.ErrStepsNotDone) {
		t.Errorf("CompleteJob with a failed step = %v, want ErrStepsNotDone", err)
	}
	if got := f.job(j.ID); got.State != workflow.JobRunning {
		t.Errorf("job %s after refusals, want running", got.State)
	}

	if err := f.db.StepFinished(ctx, j.ID, "a", 2, steps[2], "created", "", f.tick()); err != nil {
		t.Fatal(err)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "a", f.tick()); err != nil {
		t.Fatalf("CompleteJob: %v", err)
	}
	if got := f.job(j.ID); got.State != workflow.JobSucceeded || got.LeaseOwner != "" {
		t.Errorf("job = %+v, want succeeded", got)
	}
	if s := f.state(conn.ID); s != workflow.StateActive {
		t.Errorf("connection %s, want active", s)
	}
	acts := f.auditActions(conn.ID)
	if !slices.Equal(acts[len(acts)-2:], []string{"provisioning.start", "provisioning.succeeded"}) {
		t.Errorf("audit actions = %v", acts)
	}
	f.verifyAudit()
}

func TestCompleteJobDryRun(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	f.claim("a")
	f.run(j.ID, "a", []string{"Namespace x", "ResourceQuota x/q"}, true, 0)
	if s := f.state(conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s during a dry run, want approved", s)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "a", f.tick()); err != nil {
		t.Fatal(err)
	}
	got := f.job(j.ID)
	if got.State != workflow.JobSucceeded || !got.DryRun {
		t.Errorf("job = %+v, want a succeeded dry run", got)
	}
	if s := f.state(conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s after a dry run, want approved", s)
	}
	acts := f.auditActions(conn.ID)
	if !slices.Equal(acts, []string{"connection.create", "connection.submit", "connection.approve", "provisioning.dry_run"}) {
		t.Errorf("audit actions = %v", acts)
	}
	f.verifyAudit()
}

// An approval that adopts an existing namespace (issue 10 item 14) records
// it with an audit event, and every job of that version carries it: the
// first, a retry after a failure. Adopting a namespace the contract does
// not name is refused, with nothing stored.
func TestApproveRecordsTheNamespaceAdoption(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	other := f.submitted(contract("blue", "blue-ml", ""))
	before := f.snapshot()
	bad := f.pin(other.ID)
	bad.Adopt = "kube-system"
	if _, _, err := f.db.Approve(ctx, other.ID, f.admins[0], bad, "ok", workflow.ClusterFacts{}, f.tick()); err == nil {
		t.Fatal("an approval adopted a namespace its contract does not name")
	}
	f.assertUnchanged(before, "the refused adoption")

	conn := f.submitted(contract("red", "red-ml", ""))
	e := f.pin(conn.ID)
	e.Adopt = "red-ml"
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], e, "the team's existing namespace", workflow.ClusterFacts{}, f.tick()); err != nil {
		t.Fatal(err)
	}
	j := f.claim("a")
	if j.ConnectionID != conn.ID || j.AdoptNamespace != "red-ml" {
		t.Fatalf("job %+v, want connection %d adopting red-ml", j, conn.ID)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectID: conn.ID, Action: "connection.adopt_namespace"}, 0, 10)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Reason, "red-ml") || evs[0].ActorID != f.admins[0].ID {
		t.Errorf("adoption events = %+v, %v; want one by the admin naming red-ml", evs, err)
	}
	if err := f.db.FailJob(ctx, j.ID, "a", "boom", f.tick()); err != nil {
		t.Fatal(err)
	}
	again, err := f.db.EnqueueProvisioning(ctx, conn.ID, f.admins[0], "try again", f.tick())
	if err != nil || again.AdoptNamespace != "red-ml" {
		t.Errorf("the retry job %+v, %v; want it to carry the adoption", again, err)
	}
	// A connection approved without adopting carries none.
	plain := f.submitted(contract("green", "green-ml", ""))
	f.approve(plain.ID, f.admins[0], 1)
	if js, err := f.db.JobsFor(ctx, plain.ID); err != nil || len(js) != 1 || js[0].AdoptNamespace != "" {
		t.Errorf("jobs of a plain approval: %+v, %v", js, err)
	}
	f.verifyAudit()
}

// reapplyJobs makes n active connections and queues a re-apply job of
// each, as an admin's Re-apply does; it returns the jobs' IDs in order.
func (f *fixture) reapplyJobs(prefix string, n int) []int64 {
	f.t.Helper()
	var conns []store.Connection
	for i := range n { // all provisioned first: f.active claims the next job
		conns = append(conns, f.active(fmt.Sprintf("%s%c", prefix, 'a'+i)))
	}
	var ids []int64
	for _, conn := range conns {
		j, err := f.db.EnqueueReapply(f.t.Context(), conn.ID, f.admins[0], "re-apply", f.tick())
		if err != nil {
			f.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// ClaimJobs takes due jobs of its kind only, expired leases first, then the
// queued ones in due order, up to its limit, each as ClaimJob takes one.
func TestClaimJobsOrderKindAndLease(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	ids := f.reapplyJobs("r", 4)
	_, prov := f.approved("other") // a provisioning job: not taken
	// The first re-apply job is held by a worker whose lease expires.
	held := f.claim("dead")
	if held.ID != ids[0] {
		t.Fatalf("claimed %d, want the oldest re-apply job %d", held.ID, ids[0])
	}
	if _, err := f.db.ClaimJobs(ctx, "", workflow.JobReapply, f.now, lease, 5); err == nil {
		t.Error("ClaimJobs without an owner succeeded")
	}
	// Before the lease expires: the three queued ones, the limit taking two.
	at := f.tick()
	got, err := f.db.ClaimJobs(ctx, "w1", workflow.JobReapply, at, lease, 2)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []int64
	for _, j := range got {
		claimed = append(claimed, j.ID)
		if j.State != workflow.JobRunning || j.LeaseOwner != "w1" || j.Attempts != 1 || !j.LeaseUntil.Equal(at.Add(lease)) || j.PreviousOwner != "" {
			t.Errorf("claimed %+v; want running, leased to w1 until %s, attempt 1", j, at.Add(lease))
		}
	}
	if !slices.Equal(claimed, ids[1:3]) {
		t.Errorf("claimed %v, want %v (due order, limit 2)", claimed, ids[1:3])
	}
	// After the dead worker's lease: its job first, then the last queued.
	expiry := held.LeaseUntil
	got, err = f.db.ClaimJobs(ctx, "w2", workflow.JobReapply, expiry, lease, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != ids[0] || got[0].PreviousOwner != "dead" || got[0].Attempts != 2 || got[1].ID != ids[3] || got[1].Attempts != 1 {
		t.Errorf("claim after the lease expired = %+v; want job %d taken over from dead (attempt 2), then job %d", got, ids[0], ids[3])
	}
	if j := f.job(prov.ID); j.State != workflow.JobQueued {
		t.Errorf("the provisioning job is %s: ClaimJobs took another kind", j.State)
	}
	if got, err := f.db.ClaimJobs(ctx, "w3", workflow.JobReapply, expiry, lease, 10); err != nil || len(got) != 0 {
		t.Errorf("nothing due: ClaimJobs = %v, %v", got, err)
	}
}

// StepsDone records steps exactly as StartStep then StepFinished record
// them, a run each (a step run before keeps its count), and extends the
// lease, in one transaction.
func TestStepsDoneRecordsAsStartAndFinish(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	f.approved("red")
	f.approved("blue")
	names := []string{"Namespace x", "ResourceQuota x/q", "RoleBinding x/b"}
	one, two := f.claim("w"), f.claim("w")
	for _, j := range []workflow.Job{one, two} {
		if err := f.db.StartJob(ctx, j.ID, "w", "plan", names, false, f.tick()); err != nil {
			t.Fatal(err)
		}
		// Step 1 ran once already (a failed try), as a resumed attempt's may have.
		if err := f.db.StartStep(ctx, j.ID, "w", 1, names[1], f.now, lease); err != nil {
			t.Fatal(err)
		}
		if err := f.db.StepFailed(ctx, j.ID, "w", 1, names[1], "boom", f.now); err != nil {
			t.Fatal(err)
		}
	}
	at := f.tick()
	for seq, name := range names {
		if err := f.db.StartStep(ctx, one.ID, "w", seq, name, at, lease); err != nil {
			t.Fatal(err)
		}
		if err := f.db.StepFinished(ctx, one.ID, "w", seq, name, "unchanged", fmt.Sprintf("resourceVersion %d", seq), at); err != nil {
			t.Fatal(err)
		}
	}
	var batch []workflow.JobStep
	for seq, name := range names {
		batch = append(batch, workflow.JobStep{Seq: seq, Name: name, Outcome: "unchanged", Detail: fmt.Sprintf("resourceVersion %d", seq)})
	}
	if err := f.db.StepsDone(ctx, two.ID, "w", batch, at, lease); err != nil {
		t.Fatal(err)
	}
	want, got := f.steps(one.ID), f.steps(two.ID)
	if len(got) != len(want) {
		t.Fatalf("%d steps, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		w.JobID, g.JobID = 0, 0
		if g != w {
			t.Errorf("step %d by StepsDone = %+v\nby StartStep and StepFinished = %+v", i, g, w)
		}
	}
	if got[1].Attempts != 2 {
		t.Errorf("step 1 attempts %d, want 2 (its failed run and this one)", got[1].Attempts)
	}
	if j := f.job(two.ID); !j.LeaseUntil.Equal(at.Add(lease)) {
		t.Errorf("lease until %s, want %s", j.LeaseUntil, at.Add(lease))
	}
	if err := f.db.CompleteJob(ctx, two.ID, "w", f.tick()); err != nil {
		t.Errorf("CompleteJob after StepsDone: %v", err)
	}
}
