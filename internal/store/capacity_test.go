package store_test

import (
	"context"

	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// checkCapacityTotals fails the test when the per-cluster capacity totals
// apply keeps (migration 00021) differ from the sum recomputed from the
// rows. Every fixture runs it at its end (newFixture), so every store test
// that changes connections checks it too.
func (f *fixture) checkCapacityTotals(after string) {
	f.t.Helper()
	bad, err := f.db.CapacityTotalsMismatch(context.Background()) // also in a cleanup, after t.Context ends
	if err != nil {
		f.t.Fatalf("capacity totals after %s: %v", after, err)
	}
	if bad != "" {
		f.t.Errorf("capacity totals after %s: %s", after, bad)
	}
}

// TestCapacityTotalsFollowEveryChange walks connections through every
// kind of change that moves the capacity they hold (approve, provision,
// amend capacity up and down, a failed and a retried change, hold, revoke,
// reject, withdraw) and checks after each that the totals equal the sum
// recomputed from the rows, and that CommittedCapacity, Guarantees and
// TeamGuarantees (read from the totals) are what the rows say.
func TestCapacityTotalsFollowEveryChange(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	committed := func(exclude int64, want int, after string) {
		t.Helper()
		f.checkCapacityTotals(after)
		cc, err := f.db.CommittedCapacity(ctx, "shared-hp", exclude)
		got := 0
		for _, c := range cc {
			got += c.Count
		}
		if err != nil || got != want {
			t.Errorf("after %s: committed capacity (excluding %d) = %v, %v; want %d", after, exclude, cc, err, want)
		}
	}
	guarantee := func(team string, want int, after string) {
		t.Helper()
		g, err := f.db.Guarantees(ctx, team)
		all, err2 := f.db.TeamGuarantees(ctx)
		got := 0
		for _, c := range g[team] {
			got += c.Count
		}
		if err != nil || err2 != nil || got != want || all[team]["ml.p5.48xlarge"] != want {
			t.Errorf("after %s: team %s's guarantee = %v (all teams: %v), %v, %v; want %d", after, team, g, all[team], err, err2, want)
		}
	}
	withCount := func(team string, n int) workflow.Contract {
		c := contract(team, "hyperpod-ns-"+team, "")
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: n}}
		return c
	}
	committed(0, 0, "nothing")

	red := f.create(contract("red", "hyperpod-ns-red", ""))
	committed(0, 0, "create")
	f.transition(red.ID, workflow.EventSubmit, f.owner, "")
	committed(0, 0, "submit")
	f.approve(red.ID, f.admins[0], 1)
	committed(0, 2, "approve")
	committed(red.ID, 0, "approve, excluding the connection itself")
	f.runJob("provisioner", false, "Namespace x")
	committed(0, 2, "provision")

	// A capacity increase: committed from its approval on.
	if _, _, err := f.db.SaveContract(ctx, red.ID, 1, withCount("red", 5), f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	committed(0, 2, "a draft change")
	f.transition(red.ID, workflow.EventSubmit, f.owner, "")
	committed(0, 2, "a submitted change")
	f.approve(red.ID, f.admins[0], 1)
	committed(0, 5, "an approved increase")
	guarantee("red", 2, "an approved increase (not in force until applied)")
	committed(red.ID, 0, "an approved increase, excluding the connection")
	j := f.claim("w")
	if err := f.db.FailJob(ctx, j.ID, "w", "AccessDenied", f.tick()); err != nil {
		t.Fatal(err)
	}
	committed(0, 5, "a failed change")
	if _, err := f.db.EnqueueAmendment(ctx, red.ID, f.admins[0], "retry", f.tick()); err != nil {
		t.Fatal(err)
	}
	committed(0, 5, "a retried change")
	f.runJob("w", false, "ResourceQuota x")
	committed(0, 5, "the change applied")
	guarantee("red", 5, "the change applied")

	// A decrease.
	if _, _, err := f.db.SaveContract(ctx, red.ID, 2, withCount("red", 1), f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(red.ID, workflow.EventSubmit, f.owner, "")
	f.approve(red.ID, f.admins[0], 1)
	committed(0, 5, "an approved decrease (the larger is held while it is applied)")
	f.runJob("w", false, "ResourceQuota x")
	committed(0, 1, "the decrease applied")

	// A second connection, held, then revoked.
	blue := f.active("blue")
	committed(0, 3, "a second connection")
	reviewer := f.user("reviewer")
	if _, err := f.db.ProposeHold(ctx, blue.ID, reviewer, "idle", f.tick()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.db.DecideHold(ctx, blue.ID, workflow.HoldStepConfirm, f.admins[1], false, "confirmed", f.tick()); err != nil {
		t.Fatal(err)
	}
	committed(0, 3, "a hold")
	f.runJob("w", false, "ClusterQueue x") // the hold's job
	committed(0, 3, "the hold applied")
	f.revoke(red.ID, "project over")
	committed(0, 3, "revoke (still revoking)")
	f.runJob("w", false, "Namespace x")
	committed(0, 2, "revoked")
	guarantee("red", 0, "revoked")
	guarantee("blue", 2, "revoked (the other team)")
	committed(blue.ID, 0, "revoked, excluding the other connection")

	// Rejected and withdrawn requests never held anything.
	green := f.submitted(withCount("green", 7))
	f.transition(green.ID, workflow.EventReject, f.admins[0], "no")
	yellow := f.submitted(withCount("yellow", 9))
	f.transition(yellow.ID, workflow.EventWithdraw, f.owner, "not needed")
	committed(0, 2, "reject and withdraw")
}

// rebuildCapacityTotals recomputes the totals after a test wrote
// connections around apply.
func (f *fixture) rebuildCapacityTotals() {
	f.t.Helper()
	if err := f.db.ExecForTest(context.Background(), store.RebuildCapacityTotalsSQL...); err != nil {
		f.t.Fatal(err)
	}
}
