package provision_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// slurmSubmit submits a batch job as user (a member submits, not the
// portal), through runuser, as internal/slurm's test bed test does.
func slurmSubmit(t *testing.T, user string, args ...string) string {
	t.Helper()
	argv := append([]string{"-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null"}, args...)
	cmd := exec.Command("runuser", argv...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+os.Getenv("PORTAL_TEST_SLURM_CONF"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch as %s %v: %v: %s", user, args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

// slurmJobState is a job's state and reason as squeue shows them ("%T",
// "%r"); "" when squeue no longer lists the job.
func slurmJobState(t *testing.T, r slurm.Runner, id string) (state, reason string) {
	t.Helper()
	out, err := r.Run(context.Background(), "squeue", "--noheader", "--jobs="+id, "--format=%T|%r")
	if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
		t.Fatal(err)
	}
	state, reason, _ = strings.Cut(strings.TrimSpace(string(out)), "|")
	return state, reason
}

// waitSlurmJob waits up to a minute for the job's squeue state and reason
// to satisfy ok, and returns them.
func waitSlurmJob(t *testing.T, r slurm.Runner, id string, ok func(state, reason string) bool) (string, string) {
	t.Helper()
	var state, reason string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if state, reason = slurmJobState(t, r, id); ok(state, reason) {
			break
		}
	}
	return state, reason
}

// slurmDriftNow runs the drift checker once on the bed's connection, with
// the store's holds, and returns what it found.
func slurmDriftNow(t *testing.T, b *bed, w *provision.Worker, r slurm.Runner) []workflow.DriftItem {
	t.Helper()
	var saved []workflow.DriftItem
	d := &provision.DriftChecker{
		List: func(context.Context) ([]provision.ConnVersion, error) {
			return []provision.ConnVersion{{ConnectionID: b.conn.ID, Version: 1}}, nil
		},
		Plans: w.Plans, Slurm: r, StopPolicies: b.db.HoldStopPolicies,
		Save: func(_ context.Context, _ int64, _ workflow.DriftBasis, items []workflow.DriftItem, checkErr string, _ time.Time) error {
			if checkErr != "" {
				t.Errorf("drift check failed: %s", checkErr)
			}
			saved = items
			return nil
		},
	}
	if _, err := d.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	return saved
}

// TestSlurmHoldOnTheTestBed: on the test bed's real Slurm, a confirmed hold
// on a provisioned Slurm connection keeps a member's newly submitted job
// PENDING with Slurm's reason AssocGrpJobsLimit while the job already
// running keeps running; hold-and-drain cancels the running job (sacct
// says CANCELLED) and leaves the pending one pending; the release lets the
// pending job start, and the account has no job limit again.
func TestSlurmHoldOnTheTestBed(t *testing.T) {
	b, r, members, partition, account, _ := slurmTestBedConnection(t)
	ctx := context.Background()
	w := b.worker("w1", &fakeCluster{})
	w.Slurm = r
	b.runOnce(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s after provisioning, want active", s)
	}
	submit := func() string {
		id := slurmSubmit(t, members[0], "--account="+account, "--partition="+partition, "--gres=gpu:1", "--wrap", "sleep 300")
		t.Cleanup(func() { r.Run(context.Background(), "scancel", id) })
		return id
	}
	running := submit()
	if st, why := waitSlurmJob(t, r, running, func(s, _ string) bool { return s == "RUNNING" }); st != "RUNNING" {
		t.Fatalf("job %s before the hold: %s (%s), want RUNNING", running, st, why)
	}
	hold := func(step workflow.HoldStep) {
		t.Helper()
		b.clock.Add(time.Minute)
		_, jobID, err := b.db.DecideHold(ctx, b.conn.ID, step, workflow.Actor{Email: "other-admin@example.test"}, true, "test "+string(step), b.clock.Now())
		if err != nil || jobID == 0 {
			t.Fatalf("%s: job %d, %v", step, jobID, err)
		}
		b.runOnce(w)
		if j := b.jobNow(jobID); j.State != workflow.JobSucceeded {
			t.Fatalf("%s job = %s: %s", step, j.State, j.LastError)
		}
		t.Logf("%s steps: %+v", step, b.steps(jobID))
	}
	if _, err := b.db.ProposeHold(ctx, b.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "end date passed", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	hold(workflow.HoldStepConfirm)

	pending := submit()
	st, why := waitSlurmJob(t, r, pending, func(_, reason string) bool { return reason == "AssocGrpJobsLimit" })
	if st != "PENDING" || why != "AssocGrpJobsLimit" {
		t.Fatalf("job %s submitted during the hold: %s (%s), want PENDING (AssocGrpJobsLimit)", pending, st, why)
	}
	if st, why := slurmJobState(t, r, running); st != "RUNNING" {
		t.Errorf("job %s running before the hold: %s (%s), want still RUNNING", running, st, why)
	}

	// A re-apply of the plan while held keeps the limit, and the drift
	// check (which compares it with the hold) finds nothing; loosened by
	// hand, it is drift. The hand edit is GrpJobs=1, not a lift (-1): with
	// the running job the account is still at its limit, so the pending
	// job stays pending; lifted, the scheduler started it meanwhile on a
	// loaded machine, and the drain then cancelled it (seen on the test
	// bed). The lift itself is HoldDrift's unit test's.
	rj, err := b.db.EnqueueReapply(ctx, b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "re-apply while held", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.runOnce(w)
	if j := b.jobNow(rj.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("re-apply while held = %s: %s", j.State, j.LastError)
	}
	if items := slurmDriftNow(t, b, w, r); len(items) != 0 {
		t.Errorf("drift while held = %+v; want none", items)
	}
	if _, err := r.Run(ctx, "sacctmgr", "-i", "modify", "account", "where", "name="+account, "set", "GrpJobs=1"); err != nil {
		t.Fatal(err)
	}
	if items := slurmDriftNow(t, b, w, r); len(items) != 1 || !slices.Equal(items[0].Fields, []string{"GrpJobs"}) {
		t.Errorf("drift with the hold loosened by hand = %+v; want the account's GrpJobs", items)
	}
	if _, err := r.Run(ctx, "sacctmgr", "-i", "modify", "account", "where", "name="+account, "set", "GrpJobs=0"); err != nil {
		t.Fatal(err)
	}

	hold(workflow.HoldStepDrain)
	var state string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, err := r.Run(ctx, "sacct", "--noheader", "--allocations", "--parsable2", "--jobs="+running, "--format=State")
		if err != nil {
			t.Fatal(err)
		}
		if state = strings.TrimSpace(string(out)); strings.HasPrefix(state, "CANCELLED") {
			break
		}
	}
	if !strings.HasPrefix(state, "CANCELLED") {
		t.Errorf("job %s after the drain: sacct says %q, want CANCELLED", running, state)
	}
	if st, why := slurmJobState(t, r, pending); st != "PENDING" || why != "AssocGrpJobsLimit" {
		t.Errorf("job %s after the drain: %s (%s), want still PENDING (AssocGrpJobsLimit)", pending, st, why)
	}

	hold(workflow.HoldStepRelease)
	if st, why := waitSlurmJob(t, r, pending, func(s, _ string) bool { return s == "RUNNING" }); st != "RUNNING" {
		t.Errorf("job %s after the release: %s (%s), want RUNNING", pending, st, why)
	}
	rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "account="+account, "format=Account,User,GrpJobs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rows {
		if a["GrpJobs"] != "" {
			t.Errorf("after the release, association %v has a job limit", a)
		}
	}
}

// TestSlurmHeldAccountRenamedKeepsItsHold: on the test bed's real Slurm, a
// connection on hold (GrpJobs=0 on its account, from the confirmed hold's
// job) whose amendment renames the account keeps its hold: the new
// account's association has GrpJobs=0 (sacctmgr show associations -P),
// the old account is gone, a member's job submitted under the new account
// stays PENDING with Slurm's reason AssocGrpJobsLimit, and the drift
// check, which compares the limit with the store's hold, finds nothing.
func TestSlurmHeldAccountRenamedKeepsItsHold(t *testing.T) {
	b, w, r, members, partition, account, _ := heldSlurmConnection(t)
	ctx := context.Background()
	b.runOnce(w)
	grpJobs := func(acct string) (string, int) { return accountGrpJobs(t, r, acct) }
	if g, _ := grpJobs(account); g != "0" {
		t.Fatalf("account %s after the confirmed hold: GrpJobs %q, want 0", account, g)
	}

	renamed := account + "h"
	aj, ap := amendment(t, b.db, b.clock.Now(), w.Plans, b.conn.ID, func(c *workflow.Contract) { c.SlurmScope.Account = renamed })
	t.Cleanup(func() { slurmprov.Revoke(context.Background(), r, *ap.Slurm) })
	b.runOnce(w)
	if j := b.jobNow(aj.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("amend job = %s: %s (steps %+v)", j.State, j.LastError, b.steps(aj.ID))
	}
	if g, n := grpJobs(renamed); g != "0" || n != 1+len(members) {
		t.Errorf("renamed account %s: GrpJobs %q, %d associations; want 0 (the hold kept) and the account with its %d members", renamed, g, n, len(members))
	}
	if _, n := grpJobs(account); n != 0 {
		t.Errorf("old account %s: %d associations left after the renaming amendment", account, n)
	}
	id := slurmSubmit(t, members[0], "--account="+renamed, "--partition="+partition, "--gres=gpu:1", "--wrap", "sleep 300")
	t.Cleanup(func() { r.Run(context.Background(), "scancel", id) })
	if st, why := waitSlurmJob(t, r, id, func(_, reason string) bool { return reason == "AssocGrpJobsLimit" }); st != "PENDING" || why != "AssocGrpJobsLimit" {
		t.Errorf("job %s under the renamed held account: %s (%s), want PENDING (AssocGrpJobsLimit)", id, st, why)
	}
	var saved []workflow.DriftItem
	d := &provision.DriftChecker{
		List: func(context.Context) ([]provision.ConnVersion, error) {
			return []provision.ConnVersion{{ConnectionID: b.conn.ID, Version: aj.Version}}, nil
		},
		Plans: w.Plans, Slurm: r, StopPolicies: b.db.HoldStopPolicies,
		Save: func(_ context.Context, _ int64, _ workflow.DriftBasis, items []workflow.DriftItem, checkErr string, _ time.Time) error {
			if checkErr != "" {
				t.Errorf("drift check failed: %s", checkErr)
			}
			saved = items
			return nil
		},
	}
	if _, err := d.RunOnce(ctx); err != nil || len(saved) != 0 {
		t.Errorf("drift after the renaming amendment of a held connection: %+v, %v; want none", saved, err)
	}
}

// accountGrpJobs reads account acct's GrpJobs on the test bed's Slurm
// ("no association" when it has none) and how many associations it has.
func accountGrpJobs(t *testing.T, r slurm.Runner, acct string) (string, int) {
	t.Helper()
	rows, err := slurm.Query(context.Background(), r, "sacctmgr", "-P", "show", "associations", "where", "account="+acct, "format=Account,User,GrpJobs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rows {
		if a["User"] == "" {
			return a["GrpJobs"], len(rows)
		}
	}
	return "no association", len(rows)
}

// heldSlurmConnection is slurmTestBedConnection provisioned by a worker
// on its Slurm, with a hold proposed and confirmed (the hold job queued,
// its id returned, not run).
func heldSlurmConnection(t *testing.T) (b *bed, w *provision.Worker, r slurm.Runner, members []string, partition, account string, holdJob int64) {
	t.Helper()
	b, r, members, partition, account, _ = slurmTestBedConnection(t)
	ctx := context.Background()
	w = b.worker("w1", &fakeCluster{})
	w.Slurm = r
	b.runOnce(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s after provisioning, want active", s)
	}
	if _, err := b.db.ProposeHold(ctx, b.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "end date passed", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(time.Minute)
	_, holdJob, err := b.db.DecideHold(ctx, b.conn.ID, workflow.HoldStepConfirm, workflow.Actor{Email: "other-admin@example.test"}, true, "confirm", b.clock.Now())
	if err != nil || holdJob == 0 {
		t.Fatalf("confirm: job %d, %v", holdJob, err)
	}
	return b, w, r, members, partition, account, holdJob
}

// failingSlurm fails every command, as a transport that cannot reach the
// controller does.
type failingSlurm struct{}

func (failingSlurm) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	return nil, fmt.Errorf("slurm: %s: the controller cannot be reached", name)
}

// TestSlurmHoldQueuedBeforeARenameHoldsTheNewAccount: a hold is confirmed
// but its job cannot reach Slurm (it waits to retry); meanwhile a change
// renaming the account is approved and its job runs first. The amendment
// adds the new account held, because the portal has the team on hold
// (Step.SlurmHeld), though the old account was never held; the hold job's
// retry then holds the account the connection has now (its live
// versions'), passing over the one the amendment retired, and succeeds.
// A member's job under the new account pends with AssocGrpJobsLimit.
func TestSlurmHoldQueuedBeforeARenameHoldsTheNewAccount(t *testing.T) {
	b, w, r, members, partition, account, holdID := heldSlurmConnection(t)
	w.Slurm = failingSlurm{}
	b.runOnce(w)
	if j := b.jobNow(holdID); j.State != workflow.JobQueued || j.LastError == "" {
		t.Fatalf("hold job after an unreachable controller = %s (%q); want queued for a retry", j.State, j.LastError)
	}
	grpJobs := func(acct string) (string, int) { return accountGrpJobs(t, r, acct) }
	if g, _ := grpJobs(account); g != "" {
		t.Fatalf("account %s before the hold job ran: GrpJobs %q, want none", account, g)
	}

	renamed := account + "q"
	aj, ap := amendment(t, b.db, b.clock.Now(), w.Plans, b.conn.ID, func(c *workflow.Contract) { c.SlurmScope.Account = renamed })
	t.Cleanup(func() { slurmprov.Revoke(context.Background(), r, *ap.Slurm) })
	w.Slurm = r
	b.runOnce(w) // the amendment: due now, the hold job in its backoff
	if j := b.jobNow(aj.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("amend job = %s: %s (steps %+v)", j.State, j.LastError, b.steps(aj.ID))
	}
	if g, n := grpJobs(renamed); g != "0" || n != 1+len(members) {
		t.Errorf("renamed account %s after the amendment: GrpJobs %q, %d associations; want 0 (the team is on hold) with its %d members", renamed, g, n, len(members))
	}
	if _, n := grpJobs(account); n != 0 {
		t.Errorf("old account %s: %d associations left after the renaming amendment", account, n)
	}

	b.clock.Add(time.Minute)
	b.runOnce(w) // the hold job's retry
	if j := b.jobNow(holdID); j.State != workflow.JobSucceeded {
		t.Fatalf("hold job's retry = %s: %s (steps %+v)", j.State, j.LastError, b.steps(holdID))
	}
	steps := b.steps(holdID)
	var named []string
	for _, s := range steps {
		named = append(named, s.Name)
	}
	if len(steps) != 2 || !strings.Contains(named[0], " account "+account+" ") || !strings.Contains(named[1], " account "+renamed+" ") {
		t.Errorf("hold job steps %v; want the old account's (passed over) then the renamed one's", named)
	}
	if g, _ := grpJobs(renamed); g != "0" {
		t.Errorf("renamed account %s after the hold job: GrpJobs %q, want 0", renamed, g)
	}
	id := slurmSubmit(t, members[0], "--account="+renamed, "--partition="+partition, "--gres=gpu:1", "--wrap", "sleep 300")
	t.Cleanup(func() { r.Run(context.Background(), "scancel", id) })
	if st, why := waitSlurmJob(t, r, id, func(_, reason string) bool { return reason == "AssocGrpJobsLimit" }); st != "PENDING" || why != "AssocGrpJobsLimit" {
		t.Errorf("job %s under the renamed held account: %s (%s), want PENDING (AssocGrpJobsLimit)", id, st, why)
	}
}
