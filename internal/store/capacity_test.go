package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

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
		// The guarantee history's step in force now is the same.
		h, err := f.db.GuaranteeHistory(ctx, team)
		if n := h.At(team, "ml.p5.48xlarge", f.now); err != nil || n != int64(want) {
			t.Errorf("after %s: team %s's guarantee history says %d now (%v), want %d", after, team, n, err, want)
		}
	}
	withCount := func(team string, n int) workflow.Contract {
		c := contract(team, "hyperpod-ns-"+team, "")
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: n}}
		return c
	}
	committed(0, 0, "nothing")
	// The windows within which red's guarantee steps must be dated.
	var redSteps [][2]time.Time
	step := func(do func()) {
		from := f.now
		do()
		redSteps = append(redSteps, [2]time.Time{from, f.now})
	}

	red := f.create(contract("red", "hyperpod-ns-red", ""))
	committed(0, 0, "create")
	f.transition(red.ID, workflow.EventSubmit, f.owner, "")
	committed(0, 0, "submit")
	step(func() { f.approve(red.ID, f.admins[0], 1) })
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
	step(func() { f.runJob("w", false, "ResourceQuota x") })
	committed(0, 5, "the change applied")
	guarantee("red", 5, "the change applied")

	// A decrease.
	if _, _, err := f.db.SaveContract(ctx, red.ID, 2, withCount("red", 1), f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(red.ID, workflow.EventSubmit, f.owner, "")
	f.approve(red.ID, f.admins[0], 1)
	committed(0, 5, "an approved decrease (the larger is held while it is applied)")
	step(func() { f.runJob("w", false, "ResourceQuota x") })
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
	step(func() { f.runJob("w", false, "Namespace x") })
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

	// Red's guarantee over time: 2 from its approval, 5 from when the
	// increase was applied (not approved), 1 from when the decrease was,
	// 0 from the revocation's end; each step dated by the command that
	// changed it (within the window recorded around it above).
	h, err := f.db.GuaranteeHistory(ctx, "red")
	if err != nil {
		t.Fatal(err)
	}
	steps := h["red"]["ml.p5.48xlarge"]
	var counts []int64
	for i, st := range steps {
		counts = append(counts, st.Count)
		if w := redSteps[i]; i < len(redSteps) && (st.From.Before(w[0]) || st.From.After(w[1])) {
			t.Errorf("red's step %d (%d) from %s, outside [%s, %s]", i, st.Count, st.From, w[0], w[1])
		}
	}
	if !slices.Equal(counts, []int64{2, 5, 1, 0}) || len(redSteps) != 4 {
		t.Errorf("red's guarantee history %v (%d windows)", steps, len(redSteps))
	}
}

// rebuildCapacityTotals recomputes the totals after a test wrote
// connections around apply.
func (f *fixture) rebuildCapacityTotals() {
	f.t.Helper()
	if err := f.db.ExecForTest(context.Background(), store.RebuildCapacityTotalsSQL...); err != nil {
		f.t.Fatal(err)
	}
}

// TestCapacityHoldingStatesAgree: the capacity the store counts a
// connection holding (its SQL, built from workflow.CommittedStates and
// workflow.CommittedAmendments) is what workflow's State.Committed and
// Amendment.Committed say, in every state and with every amendment: the
// cluster holds the larger of the approved and the changed version's
// count while the change is committed, the approved version's otherwise,
// and the team's guarantee is the approved version's; nothing outside the
// committed states. The live connections (workflow.LiveStates) are read
// by the same rule.
func TestCapacityHoldingStatesAgree(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	const typ = "ml.p5.48xlarge"
	withCount := func(n int) workflow.Contract {
		c := contract("red", "hyperpod-ns-red", "")
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: typ, Count: n}}
		return c
	}
	conn := f.create(withCount(2))
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, withCount(5), f.owner, f.tick()); err != nil {
		t.Fatalf("SaveContract: %v", err)
	}
	for _, st := range workflow.AllStates {
		for _, am := range workflow.AllAmendments {
			if _, err := f.raw.ExecContext(ctx, `UPDATE connections SET state = ?, amendment = ?, approved_version = 1, current_version = 2 WHERE id = ?`,
				string(st), string(am), conn.ID); err != nil {
				t.Fatal(err)
			}
			f.rebuildCapacityTotals()
			wantCluster, wantTeam := 0, 0
			if st.Committed() {
				wantCluster, wantTeam = 2, 2
				if am.Committed() {
					wantCluster = 5
				}
			}
			cc, err := f.db.CommittedCapacity(ctx, "shared-hp", 0)
			if err != nil {
				t.Fatal(err)
			}
			gotCluster := 0
			for _, c := range cc {
				gotCluster += c.Count
			}
			all, err := f.db.TeamGuarantees(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if gotCluster != wantCluster || all["red"][typ] != wantTeam {
				t.Errorf("state %s, amendment %q: the cluster holds %d and the team's guarantee is %d; workflow says %d and %d",
					st, am, gotCluster, all["red"][typ], wantCluster, wantTeam)
			}
			// And the live connections the scheduler reads are
			// workflow's live ones (State.Live, workflow.LiveStates).
			live, err := f.db.LiveConnections(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(live) == 1 && live[0].ID == conn.ID; got != st.Live() || len(live) > 1 {
				t.Errorf("state %s: LiveConnections = %d connections, want live %v", st, len(live), st.Live())
			}
		}
	}
}
