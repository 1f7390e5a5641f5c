package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Rejections and change requests, like approvals, come from someone
// independent of the request; the store checks it inside the transaction
// that records the decision, against the rows as they are then.
func TestTransitionDecisionIndependence(t *testing.T) {
	for _, ev := range []workflow.Event{workflow.EventReject, workflow.EventRequestChanges} {
		t.Run(string(ev), func(t *testing.T) {
			f := newFixture(t, 3)
			ctx := t.Context()
			a1, a2, a3 := f.admins[0], f.admins[1], f.admins[2]

			// a1 authored version 2; a2 submitted it.
			conn := f.submitted(workflow.ExampleContract())
			f.transition(conn.ID, workflow.EventRequestChanges, a3, "fewer GPUs")
			c2 := workflow.ExampleContract()
			c2.Scheduling.Guaranteed[0].Count = 1
			if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c2, a1, f.tick()); err != nil {
				t.Fatal(err)
			}
			f.transition(conn.ID, workflow.EventSubmit, a2, "")

			for who, by := range map[string]workflow.Actor{"the requester": f.owner, "an author": a1, "a submitter": a2} {
				before := f.snapshot()
				_, err := f.db.Transition(ctx, conn.ID, ev, by, "no", f.pin(conn.ID), f.tick())
				if !errors.Is(err, workflow.ErrNotIndependent) {
					t.Errorf("%s by %s: error = %v, want ErrNotIndependent", ev, who, err)
				}
				f.assertUnchanged(before, fmt.Sprintf("%s by %s", ev, who))
			}
			got, err := f.db.Transition(ctx, conn.ID, ev, a3, "no", f.pin(conn.ID), f.tick())
			if err != nil || got.State == workflow.StateSubmitted {
				t.Errorf("%s by an independent admin = %s, %v", ev, got.State, err)
			}
		})
	}
}

// How many distinct admins must approve is read from the version inside the
// approval's transaction: a caller that looked before the owner changed the
// request to restricted data (and so passes needed = 1) records one
// approval of the two, queues no job and leaves the request submitted.
func TestApproveNeedsWhatTheVersionNeeds(t *testing.T) {
	f := newFixture(t, 2)
	c := workflow.ExampleContract()
	c.DataClassification = workflow.DataRestricted
	conn := f.submitted(c)
	got, n := f.approve(conn.ID, f.admins[0], 1)
	if n != 1 || got.State != workflow.StateSubmitted || len(f.jobs(conn.ID)) != 0 {
		t.Fatalf("one approval of a restricted version: %s, %d approvals, %d jobs; want submitted, 1, none", got.State, n, len(f.jobs(conn.ID)))
	}
	got, n = f.approve(conn.ID, f.admins[1], 1)
	if n != 2 || got.State != workflow.StateApproved || len(f.jobs(conn.ID)) != 1 {
		t.Errorf("second admin: %s, %d approvals, %d jobs; want approved, 2, one job", got.State, n, len(f.jobs(conn.ID)))
	}
}

// Every state in which a connection holds its approved capacity counts
// against the cluster: an approval that would exceed the inventory because
// a connection in that state holds the capacity is refused. States that
// hold none (never approved, or revoked) do not count. The table names the
// live states itself, so removing one from the store's list fails here.
func TestCapacityHeldInEveryLiveState(t *testing.T) {
	const p5 = "ml.p5.48xlarge"
	holds := map[workflow.State]bool{
		workflow.StateApproved: true, workflow.StateProvisioning: true, workflow.StateActive: true,
		workflow.StateUnderReview: true, workflow.StateRevoking: true,
	}
	sys := workflow.Actor{Email: "system"}
	// into brings a new connection to state s.
	into := func(f *fixture, c workflow.Contract, s workflow.State) store.Connection {
		admin := f.admins[0]
		var events []workflow.Event
		switch s {
		case workflow.StateDraft:
			return f.create(c)
		case workflow.StateWithdrawn:
			return f.transition(f.create(c).ID, workflow.EventWithdraw, f.owner, "")
		case workflow.StateSubmitted:
			return f.submitted(c)
		case workflow.StateChangesRequested:
			return f.transition(f.submitted(c).ID, workflow.EventRequestChanges, admin, "why")
		case workflow.StateRejected:
			return f.transition(f.submitted(c).ID, workflow.EventReject, admin, "no")
		case workflow.StateApproved:
		case workflow.StateProvisioning:
			events = []workflow.Event{workflow.EventStartProvisioning}
		case workflow.StateActive:
			events = []workflow.Event{workflow.EventStartProvisioning, workflow.EventProvisioningSucceeded}
		case workflow.StateUnderReview:
			events = []workflow.Event{workflow.EventStartProvisioning, workflow.EventProvisioningSucceeded, workflow.EventStartReview}
		case workflow.StateRevoking:
			events = []workflow.Event{workflow.EventRevoke}
		case workflow.StateRevoked:
			events = []workflow.Event{workflow.EventRevoke, workflow.EventRevocationDone}
		default:
			f.t.Fatalf("no path to state %s", s)
		}
		conn, _ := f.approve(f.submitted(c).ID, admin, 1)
		for _, ev := range events {
			conn = f.transition(conn.ID, ev, sys, "")
		}
		return conn
	}
	for _, s := range workflow.AllStates {
		t.Run(string(s), func(t *testing.T) {
			f := newFixture(t, 1)
			ctx := t.Context()
			if err := f.db.SetInventory(ctx, "shared-hp", p5, 4, f.admins[0], f.tick()); err != nil {
				t.Fatal(err)
			}
			withP5 := func(team string, n int) workflow.Contract {
				c := contract(team, "ns-"+team, "")
				c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: p5, Count: n}}
				return c
			}
			holder := into(f, withP5("amber", 3), s)
			if holder.State != s {
				t.Fatalf("holder is %s, want %s", holder.State, s)
			}
			target := f.submitted(withP5("gold", 2)) // 3 + 2 > 4
			errFull := workflow.ErrOverCapacity
			before := f.snapshot()
			got, _, err := f.db.Approve(ctx, target.ID, f.admins[0], f.pin(target.ID), "ok", workflow.ClusterFacts{}, f.tick())
			if holds[s] {
				if !errors.Is(err, errFull) {
					t.Errorf("a connection %s holds 3 of 4: approving 2 more = %s, %v; want refused over capacity", s, got.State, err)
				}
				f.assertUnchanged(before, "an approval over capacity")
			} else if err != nil || got.State != workflow.StateApproved {
				t.Errorf("a connection %s holds nothing: approving 2 of 4 = %s, %v; want approved", s, got.State, err)
			}
		})
	}
}

// Trying provisioning again (after a failure, or after adopting a quota)
// queues a job pinned to the plan the approval named, never an unpinned
// one; an approval that named no plan gets no job.
func TestEnqueueProvisioningIsPinned(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	conn, j := f.approved("red")
	if j.PlanHash == "" {
		t.Fatalf("the approval's job is unpinned: %+v", j)
	}
	f.claim("a")
	if err := f.db.FailJob(ctx, j.ID, "a", "boom", f.tick()); err != nil {
		t.Fatal(err)
	}
	again, err := f.db.EnqueueProvisioning(ctx, conn.ID, f.admins[0], "retry", f.tick())
	if err != nil || again.PlanHash != j.PlanHash || again.Version != j.Version {
		t.Fatalf("retry = %+v, %v; want a job pinned to %s at version %d", again, err, j.PlanHash, j.Version)
	}

	// An approval recorded before approvals named their plan.
	f = newFixture(t, 1)
	legacy, lj := f.approved("blue")
	f.claim("b")
	if err := f.db.FailJob(ctx, lj.ID, "b", "boom", f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.raw.ExecContext(ctx, `UPDATE jobs SET plan_hash = '' WHERE connection_id = ?`, legacy.ID); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot()
	if _, err := f.db.EnqueueProvisioning(ctx, legacy.ID, f.admins[0], "retry", f.tick()); !errors.Is(err, workflow.ErrUnpinned) {
		t.Errorf("retry of an unpinned approval = %v, want ErrUnpinned", err)
	}
	f.assertUnchanged(before, "a retry without an approved plan")
	if n := len(f.jobs(legacy.ID)); n != 1 {
		t.Errorf("%d jobs, want the failed one only", n)
	}
}
