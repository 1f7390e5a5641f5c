package store_test

import (
	"slices"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestTeamQueueVersions: the versions a team's ClusterQueue sums are the
// approved versions of the team's connections on the cluster in a counted
// state (workflow.State.InTeamQueue), but the one asked to leave out: not
// another team's, not another cluster's, not a draft version.
func TestTeamQueueVersions(t *testing.T) {
	f := newFixture(t, 0)
	ctx := t.Context()
	a := f.create(contract("red", "red-a", ""))
	b := f.create(contract("red", "red-b", ""))
	other := contract("red", "red-c", "")
	other.ClusterName = "another-hp"
	elsewhere := f.create(other)
	blue := f.create(contract("blue", "blue-a", ""))
	// b's change (version 2, 5 instances) is not approved: the queue
	// counts its approved version 1.
	changed := contract("red", "red-b", "")
	changed.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: changed.Scheduling.Guaranteed[0].InstanceType, Count: 5}}
	if _, _, err := f.db.SaveContract(ctx, b.ID, 1, changed, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	for _, st := range workflow.AllStates {
		for _, id := range []int64{a.ID, b.ID, elsewhere.ID, blue.ID} {
			if _, err := f.raw.ExecContext(ctx, `UPDATE connections SET state = ?, approved_version = 1 WHERE id = ?`, string(st), id); err != nil {
				t.Fatal(err)
			}
		}
		f.rebuildCapacityTotals()
		for _, except := range []int64{0, a.ID} {
			vs, err := f.db.TeamQueueVersions(ctx, "red", "shared-hp", except)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, v := range vs {
				if v.Version != 1 {
					t.Errorf("%s: connection %d counted with version %d, want its approved 1", st, v.ConnectionID, v.Version)
				}
				got = append(got, v.ConnectionID)
			}
			var want []int64
			if st.InTeamQueue() {
				for _, id := range []int64{a.ID, b.ID} {
					if id != except {
						want = append(want, id)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, leaving out %d: %v, want %v", st, except, got, want)
			}
		}
	}
}
