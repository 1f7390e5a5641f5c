package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// batchPlan is job i's plan in the batch tests: plans of different
// lengths, so that each job's own length must reach its own rows.
func batchPlan(i int) (hash string, names []string) {
	for s := range 2 + i {
		names = append(names, fmt.Sprintf("ConfigMap ns-%d/c%d", i, s))
	}
	return fmt.Sprintf("plan-%d", i), names
}

// batchFixture is a database with three claimed re-apply jobs; the first
// was started before with a longer plan whose step 1 failed and whose
// step 4 is beyond its new plan (a resumed attempt).
func batchFixture(t *testing.T) (*fixture, []int64, time.Time) {
	f := newFixture(t, 1)
	ctx := t.Context()
	ids := f.reapplyJobs("b", 3)
	at := f.tick()
	jobs, err := f.db.ClaimJobs(ctx, "w", workflow.JobReapply, at, lease, 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("ClaimJobs = %d jobs, %v", len(jobs), err)
	}
	long := []string{"a", "b", "c", "d", "e"}
	if err := f.db.StartJob(ctx, ids[0], "w", "old-plan", long, false, at); err != nil {
		t.Fatal(err)
	}
	if err := f.db.StartStep(ctx, ids[0], "w", 1, "b", at, lease); err != nil {
		t.Fatal(err)
	}
	if err := f.db.StepFailed(ctx, ids[0], "w", 1, "b", "boom", at); err != nil {
		t.Fatal(err)
	}
	return f, ids, at
}

// StartJobs, StepsDoneAll and CompleteJobs record what StartJob, StepsDone
// and CompleteJob record job after job: the same job rows, step rows and
// audit events, hash for hash, on two databases that began alike.
func TestJobBatchesRecordAsOneByOne(t *testing.T) {
	one, ids, at := batchFixture(t)
	batch, ids2, _ := batchFixture(t)
	if fmt.Sprint(ids) != fmt.Sprint(ids2) {
		t.Fatalf("the two databases' jobs differ: %v and %v", ids, ids2)
	}
	ctx := t.Context()
	started, stepped, completed := at.Add(time.Second), at.Add(2*time.Second), at.Add(3*time.Second)
	var starts []workflow.JobStart
	var all []workflow.JobStep
	for i, id := range ids {
		hash, names := batchPlan(i)
		starts = append(starts, workflow.JobStart{JobID: id, PlanHash: hash, Steps: names})
		var steps []workflow.JobStep
		for seq, name := range names {
			steps = append(steps, workflow.JobStep{JobID: id, Seq: seq, Name: name, Outcome: "unchanged", Detail: fmt.Sprintf("rv %d/%d", i, seq)})
		}
		all = append(all, steps...)
		if err := one.db.StartJob(ctx, id, "w", hash, names, false, started); err != nil {
			t.Fatal(err)
		}
		if err := one.db.StepsDone(ctx, id, "w", steps, stepped, lease); err != nil {
			t.Fatal(err)
		}
		if err := one.db.CompleteJob(ctx, id, "w", completed); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.db.StartJobs(ctx, "w", starts, false, started); err != nil {
		t.Fatal(err)
	}
	if err := batch.db.StepsDoneAll(ctx, "w", all, stepped, lease); err != nil {
		t.Fatal(err)
	}
	if err := batch.db.CompleteJobs(ctx, "w", ids, completed); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if a, b := one.job(id), batch.job(id); fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Errorf("job %d one by one:\n%+v\nin a batch:\n%+v", id, a, b)
		}
		a, b := one.steps(id), batch.steps(id)
		if len(a) != 2+i || fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Errorf("steps of job %d one by one (%d, want %d):\n%+v\nin a batch:\n%+v", id, len(a), 2+i, a, b)
		}
	}
	if s := batch.steps(ids[0]); s[1].Attempts != 2 {
		t.Errorf("step 1 of the resumed job: %d attempts, want 2 (its failed run and this one)", s[1].Attempts)
	}
	ea, err := one.db.AuditEvents(ctx, store.AuditFilter{}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := batch.db.AuditEvents(ctx, store.AuditFilter{}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ea[0].Action != "reapply.succeeded" || ea[2].Action != "reapply.succeeded" {
		t.Errorf("the last events are %s, %s; want the re-applies' success", ea[0].Action, ea[2].Action)
	}
	if fmt.Sprintf("%+v", ea) != fmt.Sprintf("%+v", eb) {
		t.Errorf("audit one by one:\n%+v\nin a batch:\n%+v", ea[:4], eb[:4])
	}
	batch.verifyAudit()
}

// A batch with one job it cannot record so writes nothing at all, and
// says why: the caller then records each job on its own.
func TestJobBatchesRefuseWhole(t *testing.T) {
	f, ids, at := batchFixture(t)
	ctx := t.Context()
	events := func() int {
		ev, err := f.db.AuditEvents(ctx, store.AuditFilter{}, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(ev)
	}
	before := events()
	var starts []workflow.JobStart
	for i, id := range ids {
		hash, names := batchPlan(i)
		starts = append(starts, workflow.JobStart{JobID: id, PlanHash: hash, Steps: names})
	}
	// Another worker took the last job over.
	if _, err := f.raw.Exec(`UPDATE jobs SET lease_owner = 'other' WHERE id = ?`, ids[2]); err != nil {
		t.Fatal(err)
	}
	err := f.db.StartJobs(ctx, "w", starts, false, at)
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("StartJobs with a lost lease = %v; want ErrLeaseLost", err)
	}
	if j := f.job(ids[1]); j.AppliedPlanHash != "" || len(f.steps(ids[1])) != 0 {
		t.Errorf("a refused start wrote job %d: %+v, %d steps", ids[1], j, len(f.steps(ids[1])))
	}
	if err := f.db.StepsDoneAll(ctx, "w", []workflow.JobStep{{JobID: ids[1], Name: "x"}, {JobID: ids[2], Name: "y"}}, at, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("StepsDoneAll with a lost lease = %v; want ErrLeaseLost", err)
	}
	if n := len(f.steps(ids[1])); n != 0 {
		t.Errorf("a refused StepsDoneAll wrote %d steps of job %d", n, ids[1])
	}
	if _, err := f.raw.Exec(`UPDATE jobs SET lease_owner = 'w' WHERE id = ?`, ids[2]); err != nil {
		t.Fatal(err)
	}

	// Steps not all done: no job completes.
	if err := f.db.StartJobs(ctx, "w", starts, false, at); err != nil {
		t.Fatal(err)
	}
	var done []workflow.JobStep
	for i, id := range ids {
		_, names := batchPlan(i)
		for seq, name := range names[:len(names)-min(i, 1)] { // the last two jobs leave their last step
			done = append(done, workflow.JobStep{JobID: id, Seq: seq, Name: name, Outcome: "unchanged"})
		}
	}
	if err := f.db.StepsDoneAll(ctx, "w", done, at, lease); err != nil {
		t.Fatal(err)
	}
	err = f.db.CompleteJobs(ctx, "w", ids, at)
	if !errors.Is(err, store.ErrBatchRefused) || !errors.Is(err, store.ErrStepsNotDone) {
		t.Errorf("CompleteJobs with steps left = %v; want ErrBatchRefused and ErrStepsNotDone", err)
	}
	if j := f.job(ids[0]); j.State != workflow.JobRunning {
		t.Errorf("job %d, all its steps done, is %s after a refused batch; want running", ids[0], j.State)
	}
	if n := events(); n != before {
		t.Errorf("a refused batch wrote %d audit events", n-before)
	}

	// A start that moves its connection (a provisioning job's) is not the
	// batch's to record.
	f2 := newFixture(t, 1)
	f2.approved("p1")
	f2.approved("p2")
	p1, p2 := f2.claim("w"), f2.claim("w")
	err = f2.db.StartJobs(ctx, "w", []workflow.JobStart{{JobID: p1.ID, PlanHash: "h", Steps: []string{"a"}}, {JobID: p2.ID, PlanHash: "h", Steps: []string{"a"}}}, false, f2.tick())
	if !errors.Is(err, store.ErrBatchRefused) {
		t.Errorf("StartJobs of provisioning jobs = %v; want ErrBatchRefused", err)
	}
	if s := f2.state(p1.ConnectionID); s != workflow.StateApproved {
		t.Errorf("connection after a refused start: %s, want approved", s)
	}
	if err := f2.db.StartJob(ctx, p1.ID, "w", "h", []string{"a"}, false, f2.tick()); err != nil {
		t.Errorf("StartJob after the refused batch: %v", err)
	}
}

// VersionsOf returns the versions named, each as Version returns it, and
// leaves out the ones that do not exist.
func TestVersionsOf(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	a, b := f.submitted(contract("va", "hyperpod-ns-va", "")), f.submitted(contract("vb", "hyperpod-ns-vb", ""))
	refs := []store.VersionRef{{ConnectionID: a.ID, Version: 1}, {ConnectionID: b.ID, Version: 1}, {ConnectionID: a.ID, Version: 9}, {ConnectionID: b.ID + 100, Version: 1}}
	got, err := f.db.VersionsOf(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("VersionsOf found %d versions, want 2", len(got))
	}
	for _, r := range refs[:2] {
		want, err := f.db.Version(ctx, r.ConnectionID, r.Version)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got[r]) != fmt.Sprintf("%+v", want) {
			t.Errorf("VersionsOf[%v] = %+v\nVersion = %+v", r, got[r], want)
		}
	}
	if empty, err := f.db.VersionsOf(ctx, nil); err != nil || len(empty) != 0 {
		t.Errorf("VersionsOf(nil) = %v, %v", empty, err)
	}
}
