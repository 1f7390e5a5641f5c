package store_test

import (
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// An amendment in the store: the change's claims, the capacity it
// commits from its approval on, its review trigger, and the approved
// version moving only when its job completes.
func TestAmendmentInTheStore(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	conn := f.active("red")

	c := contract("red", "hyperpod-ns-red", "")
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 3}}
	c.BusinessOwner = f.admins[1].Email
	c.ProjectRoleARN = "arn:aws:iam::111122223333:role/red-new-project"
	got, changed, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick())
	if err != nil || !changed || got.State != workflow.StateActive || got.Amendment != workflow.AmendDraft || got.CurrentVersion != 2 || got.ApprovedVersion != 1 {
		t.Fatalf("SaveContract on an active connection = %+v, %v, %v; want a draft change", got, changed, err)
	}
	// A draft change claims nothing: another team may still name the role.
	roleTaken := func() bool {
		return f.db.ValidationEnv(ctx, f.tick(), 0, nil).RoleTaken("arn:aws:iam::111122223333:role/red-new-project")
	}
	if roleTaken() {
		t.Error("a draft change claims its new role")
	}
	f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	if !roleTaken() {
		t.Error("a submitted change does not claim its new role")
	}
	// Still the old role is held (the approved version runs).
	if !f.db.ValidationEnv(ctx, f.tick(), 0, nil).RoleTaken(contract("red", "hyperpod-ns-red", "").ProjectRoleARN) {
		t.Error("the active version's role is no longer held while a change waits")
	}
	got, n, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick())
	if err != nil || n != 1 || got.Amendment != workflow.AmendApproved || got.ApprovedVersion != 1 {
		t.Fatalf("approving the change = %+v, %d, %v", got, n, err)
	}
	// The increase is committed from the approval on.
	if cc, err := f.db.CommittedCapacity(ctx, "shared-hp", 0); err != nil || len(cc) != 1 || cc[0].Count != 3 {
		t.Errorf("committed capacity while the change is applied = %v, %v; want p5 × 3", cc, err)
	}
	var fields string
	if err := f.raw.QueryRowContext(ctx, `SELECT fields FROM review_triggers WHERE connection_id = ? AND version = 2`, conn.ID).Scan(&fields); err != nil ||
		fields != "business_owner project_role_arn" {
		t.Errorf("review trigger = %q, %v; want the owner and the project role", fields, err)
	}
	js := f.jobs(conn.ID)
	if len(js) != 2 || js[0].Kind != workflow.JobAmend || js[0].Version != 2 || js[0].FromVersion != 1 || js[0].PlanHash != f.pin(conn.ID).PlanHash {
		t.Fatalf("jobs = %+v; want an amend job of version 2 from 1, pinned", js)
	}
	f.claim("w")
	f.run(js[0].ID, "w", []string{"ResourceQuota x"}, false, 0)
	if got, _ := f.db.Connection(ctx, conn.ID); got.ApprovedVersion != 1 || got.Amendment != workflow.AmendApproved {
		t.Errorf("the approved version moved before the job completed: %+v", got)
	}
	if err := f.db.CompleteJob(ctx, js[0].ID, "w", f.tick()); err != nil {
		t.Fatal(err)
	}
	got, _ = f.db.Connection(ctx, conn.ID)
	if got.State != workflow.StateActive || got.ApprovedVersion != 2 || got.Amendment != workflow.AmendNone {
		t.Errorf("after the change's job: %+v; want active on version 2", got)
	}
	var pending int
	if err := f.raw.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE connection_id = ? AND kind = 'amendment.applied'`, conn.ID).Scan(&pending); err != nil || pending != 1 {
		t.Errorf("outbox notices of the applied change = %d, %v; want 1", pending, err)
	}
	f.verifyAudit()
}

// A failed change leaves the previous version running, and an admin's
// retry queues it again, pinned to the same plan.
func TestFailedAmendmentKeepsTheActiveVersion(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn := f.active("red")
	c := contract("red", "hyperpod-ns-red", "")
	c.EndDate = "2031-06-30"
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	f.approve(conn.ID, f.admins[0], 1)
	j := f.claim("w")
	if err := f.db.FailJob(ctx, j.ID, "w", "AccessDenied", f.tick()); err != nil {
		t.Fatal(err)
	}
	got, _ := f.db.Connection(ctx, conn.ID)
	if got.State != workflow.StateActive || got.ApprovedVersion != 1 || got.Amendment != workflow.AmendFailed {
		t.Fatalf("after the change's job failed: %+v; want active on 1, change failed", got)
	}
	again, err := f.db.EnqueueAmendment(ctx, conn.ID, f.admins[0], "retry", f.tick())
	if err != nil || again.Kind != workflow.JobAmend || again.PlanHash != j.PlanHash || again.Version != 2 || again.FromVersion != 1 {
		t.Fatalf("EnqueueAmendment = %+v, %v; want the same pinned change again", again, err)
	}
	if got, _ := f.db.Connection(ctx, conn.ID); got.Amendment != workflow.AmendApproved {
		t.Errorf("the retried change is %q, want approved", got.Amendment)
	}
	// Revoking ends the change and cancels its job.
	if _, _, err := f.db.Revoke(ctx, conn.ID, f.admins[0], "project over", f.tick()); err != nil {
		t.Fatal(err)
	}
	got, _ = f.db.Connection(ctx, conn.ID)
	if got.State != workflow.StateRevoking || got.Amendment != workflow.AmendNone {
		t.Errorf("after revoking: %+v; want revoking with no open change", got)
	}
	if j := f.job(again.ID); j.State != workflow.JobFailed {
		t.Errorf("the change's job after the revocation is %s, want failed (cancelled)", j.State)
	}
}
