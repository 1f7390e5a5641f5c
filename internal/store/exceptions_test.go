package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// excClasses are the cluster's priority classes the exception tests name
// (provision.DefaultPriorityClasses' names).
var excClasses = []string{"inference", "interactive", "training", "fine-tuning", "experiment"}

func adminPrincipal(a workflow.Actor, ms ...workflow.Membership) workflow.Principal {
	return workflow.NewPrincipal(a.ID, a.Email, a.Email, "", []workflow.Role{workflow.RoleAdmin}, ms)
}

func (f *fixture) exceptions(connID int64) []workflow.Exception {
	f.t.Helper()
	xs, err := f.db.Exceptions(f.t.Context(), connID)
	if err != nil {
		f.t.Fatal(err)
	}
	return xs
}

func (f *fixture) sweep() {
	f.t.Helper()
	if _, err := f.db.SweepExceptions(f.t.Context(), f.now); err != nil {
		f.t.Fatal(err)
	}
}

func countOf(xs []string, s string) int {
	n := 0
	for _, x := range xs {
		if x == s {
			n++
		}
	}
	return n
}

// TestExceptionLifecycle: an admin outside the team grants an exception;
// it is recorded with its reapply job in the same transaction, in effect,
// and audited; the sweep records it applied once the job succeeded; at its
// end the sweep records the intent to revert with a new reapply job (out
// of effect at once); a crash before that job is recorded done changes
// nothing (the sweep waits), a second sweep after it records the revert
// exactly once, and more sweeps add nothing.
func TestExceptionLifecycle(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	admin := adminPrincipal(f.admins[0])
	x, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "experiment", Days: 2, Reason: "board demo"}, excClasses, 14, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if x.ID == 0 || x.JobID == 0 || x.State != workflow.ExceptionActive || !x.End.Equal(x.Start.Add(48*time.Hour)) {
		t.Fatalf("granted %+v", x)
	}
	if j := f.job(x.JobID); j.Kind != workflow.JobReapply || j.State != workflow.JobQueued {
		t.Fatalf("grant's job = %+v", j)
	}
	in, err := f.db.ExceptionsInEffect(ctx, nil)
	if err != nil || len(in[conn.ID]) != 1 || in[conn.ID][0].ID != x.ID {
		t.Fatalf("in effect = %+v, %v", in, err)
	}
	if acts := f.auditActions(conn.ID); countOf(acts, "exception.grant") != 1 {
		t.Fatalf("audit = %v", acts)
	}

	// The sweep waits for the job, then records the grant applied once.
	f.sweep()
	if got := f.exceptions(conn.ID)[0]; !got.AppliedAt.IsZero() {
		t.Fatal("applied before its job ran")
	}
	f.runJob("w", false, "ConfigMap x")
	f.sweep()
	f.sweep()
	if got := f.exceptions(conn.ID)[0]; got.AppliedAt.IsZero() || got.State != workflow.ExceptionActive {
		t.Fatalf("after the job: %+v", got)
	}
	if n := countOf(f.auditActions(conn.ID), "exception.applied"); n != 1 {
		t.Fatalf("exception.applied %d times", n)
	}

	// Before the end, nothing; at the end the intent and its job.
	f.now = x.End.Add(-time.Second)
	f.sweep()
	if got := f.exceptions(conn.ID)[0]; got.State != workflow.ExceptionActive {
		t.Fatalf("before the end: %s", got.State)
	}
	f.now = x.End
	f.sweep()
	got := f.exceptions(conn.ID)[0]
	if got.State != workflow.ExceptionReverting || got.JobID == 0 || got.JobID == x.JobID || got.EndedAt.IsZero() {
		t.Fatalf("at the end: %+v", got)
	}
	if in, _ := f.db.ExceptionsInEffect(ctx, []int64{conn.ID}); len(in[conn.ID]) != 0 {
		t.Fatalf("still in effect while reverting: %+v", in)
	}
	// The worker claims the revert's job and applies it, then dies
	// before recording it done: the job is running, the exception stays
	// reverting, sweeps record nothing.
	j := f.claim("w1")
	if j.ID != got.JobID {
		t.Fatalf("claimed job %d, want the revert's %d", j.ID, got.JobID)
	}
	f.run(j.ID, "w1", []string{"ConfigMap x"}, false, 0)
	f.sweep()
	if g := f.exceptions(conn.ID)[0]; g.State != workflow.ExceptionReverting {
		t.Fatalf("recorded before the job completed: %s", g.State)
	}
	// Another worker takes the lease over once it expired and completes
	// the job (its steps are done).
	f.now = f.now.Add(2 * lease)
	if j2 := f.claim("w2"); j2.ID != j.ID {
		t.Fatalf("took over job %d, want %d", j2.ID, j.ID)
	}
	if err := f.db.CompleteJob(ctx, j.ID, "w2", f.tick()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.sweep()
	}
	g := f.exceptions(conn.ID)[0]
	if g.State != workflow.ExceptionReverted || g.RevertedAt.IsZero() {
		t.Fatalf("after the revert's job: %+v", g)
	}
	acts := f.auditActions(conn.ID)
	if countOf(acts, "exception.expire") != 1 || countOf(acts, "exception.reverted") != 1 {
		t.Fatalf("audit = %v", acts)
	}
	if got := f.outbox(conn.ID); !slices.ContainsFunc(got, func(s string) bool { return len(s) > 17 && s[:17] == "exception.granted" }) ||
		!slices.ContainsFunc(got, func(s string) bool { return len(s) > 15 && s[:15] == "exception.ended" }) {
		t.Errorf("outbox = %v", got)
	}
	f.verifyAudit()
}

// TestExceptionRefusalsWriteNothing: the team's own people (an admin of
// the team included) and people who are neither admin nor exception owner
// are refused inside the transaction, and a refusal writes nothing; a
// second grant of a class already granted is refused.
func TestExceptionRefusalsWriteNothing(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	req := workflow.ExceptionRequest{PriorityClass: "experiment", Days: 2, Reason: "r"}
	rev := f.user("reviewer")
	before := f.snapshot()
	for _, p := range []workflow.Principal{
		adminPrincipal(f.admins[0], workflow.Membership{Team: "red", Role: workflow.TeamMember}),
		workflow.NewPrincipal(f.owner.ID, "owner.red", f.owner.Email, "", nil, []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}}),
	} {
		if _, err := f.db.GrantException(ctx, conn.ID, p, req, excClasses, 14, f.tick()); !errors.Is(err, workflow.ErrExceptionOwnTeam) {
			t.Errorf("%s: %v, want ErrExceptionOwnTeam", p.Email, err)
		}
	}
	if _, err := f.db.GrantException(ctx, conn.ID, workflow.NewPrincipal(rev.ID, "r", rev.Email, "", []workflow.Role{workflow.RoleReviewer}, nil), req, excClasses, 14, f.tick()); !errors.Is(err, workflow.ErrExceptionNotOwner) {
		t.Errorf("reviewer: %v", err)
	}
	f.assertUnchanged(before, "refused grants")
	if xs := f.exceptions(conn.ID); len(xs) != 0 {
		t.Fatalf("refused grants recorded %+v", xs)
	}
	admin := adminPrincipal(f.admins[0])
	if _, err := f.db.GrantException(ctx, conn.ID, admin, req, excClasses, 14, f.tick()); err != nil {
		t.Fatal(err)
	}
	var ie *workflow.ExceptionInputError
	if _, err := f.db.GrantException(ctx, conn.ID, admin, req, excClasses, 14, f.tick()); !errors.As(err, &ie) || ie.Field != "priority_class" {
		t.Errorf("second grant of the class: %v", err)
	}
	// A class of the contract's own needs no exception.
	var ie2 *workflow.ExceptionInputError
	if _, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "inference", Days: 1, Reason: "r"}, excClasses, 14, f.tick()); !errors.As(err, &ie2) {
		t.Fatalf("inference is the contract's own class: %v", err)
	}
	if n := len(f.exceptions(conn.ID)); n != 1 {
		t.Fatalf("%d exceptions", n)
	}
}

// TestExceptionWaitsForAFreeJob: granted while a reapply job is open (the
// first grant's), an exception is recorded without a job; the sweep queues
// its job once that one is done, and records each applied once.
func TestExceptionWaitsForAFreeJob(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	admin := adminPrincipal(f.admins[0])
	classes := append(slices.Clone(excClasses), "vip")
	x1, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "experiment", Days: 1, Reason: "r"}, classes, 14, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	x2, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "vip", Days: 1, Reason: "r"}, classes, 14, f.tick())
	if err != nil || x2.JobID != 0 || x1.JobID == 0 {
		t.Fatalf("second grant = %+v, %v", x2, err)
	}
	f.sweep() // x1's job is still open: nothing
	if got := f.exceptions(conn.ID)[1]; got.JobID != 0 {
		t.Fatalf("queued while a reapply job was open: %+v", got)
	}
	f.runJob("w", false, "ConfigMap x")
	f.sweep()
	xs := f.exceptions(conn.ID)
	if xs[0].AppliedAt.IsZero() || xs[1].JobID == 0 || !xs[1].AppliedAt.IsZero() {
		t.Fatalf("after x1's job: %+v", xs)
	}
	f.runJob("w", false, "ConfigMap x")
	f.sweep()
	if xs := f.exceptions(conn.ID); xs[1].AppliedAt.IsZero() {
		t.Fatalf("x2 not applied: %+v", xs[1])
	}
	if n := countOf(f.auditActions(conn.ID), "exception.applied"); n != 2 {
		t.Errorf("exception.applied %d times, want 2", n)
	}
}

// TestExceptionRevokeEarly: the same people end it early with a reason; it
// is reverting at once with its job (or, while a reapply job is open,
// without one until the sweep queues it after that job); an exception of
// another connection is not found.
func TestExceptionRevokeEarly(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	admin := adminPrincipal(f.admins[0])
	x, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "experiment", Days: 5, Reason: "r"}, excClasses, 14, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.db.RevokeException(ctx, conn.ID+1, x.ID, admin, "wrong connection", f.tick()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other connection: %v", err)
	}
	// The grant's reapply job is still open (it may be running with the
	// class in its plan): the revocation records the intent without a job,
	// and the sweep queues one once that job is done.
	if err := f.db.RevokeException(ctx, conn.ID, x.ID, admin, "done early", f.tick()); err != nil {
		t.Fatal(err)
	}
	got := f.exceptions(conn.ID)[0]
	if got.State != workflow.ExceptionReverting || got.RevokedBy != admin.Email || got.RevokeReason != "done early" || got.JobID != 0 {
		t.Fatalf("after revoke: %+v", got)
	}
	if err := f.db.RevokeException(ctx, conn.ID, x.ID, admin, "again", f.tick()); !errors.Is(err, workflow.ErrExceptionEnded) {
		t.Errorf("second revoke: %v", err)
	}
	f.sweep() // the grant's job is open: nothing yet
	if g := f.exceptions(conn.ID)[0]; g.JobID != 0 {
		t.Fatalf("queued while a reapply job was open: %+v", g)
	}
	f.runJob("w", false, "ConfigMap x")
	f.sweep()
	g := f.exceptions(conn.ID)[0]
	if g.State != workflow.ExceptionReverting || g.JobID == 0 || g.JobID == x.JobID {
		t.Fatalf("after the grant's job: %+v", g)
	}
	f.runJob("w", false, "ConfigMap x")
	f.sweep()
	if g := f.exceptions(conn.ID)[0]; g.State != workflow.ExceptionReverted {
		t.Fatalf("after the revert's job: %+v", g)
	}
	acts := f.auditActions(conn.ID)
	if countOf(acts, "exception.revoke") != 1 || countOf(acts, "exception.reverted") != 1 {
		t.Errorf("audit = %v", acts)
	}
}

// TestExceptionRequeueAfterFailure: a revert whose job failed gets a new
// reapply job from the sweep, once.
func TestExceptionRequeueAfterFailure(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	admin := adminPrincipal(f.admins[0])
	x, err := f.db.GrantException(ctx, conn.ID, admin, workflow.ExceptionRequest{PriorityClass: "experiment", Days: 1, Reason: "r"}, excClasses, 14, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	j := f.claim("w")
	if err := f.db.FailJob(ctx, j.ID, "w", "boom", f.tick()); err != nil {
		t.Fatal(err)
	}
	f.sweep()
	f.sweep()
	got := f.exceptions(conn.ID)[0]
	if got.JobID == x.JobID || got.JobID == 0 {
		t.Fatalf("no new job after the failure: %+v", got)
	}
	n := 0
	for _, j := range f.jobs(conn.ID) {
		if j.Kind == workflow.JobReapply {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d reapply jobs, want the failed one and one more", n)
	}
}
