package store_test

import (
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// A team's guarantee in force is its approved version's: a draft request
// holds none, and a submitted change to 3 instances none until approved.
func TestGuaranteesInForce(t *testing.T) {
	f := newFixture(t, 2)
	ctx := t.Context()
	f.create(contract("blue", "hyperpod-ns-blue", "")) // a draft: no guarantee
	conn := f.active("red")
	got, err := f.db.Guarantees(ctx, "")
	if err != nil || len(got) != 1 || len(got["red"]) != 1 || got["red"][0] != (workflow.Capacity{InstanceType: "ml.p5.48xlarge", Count: 2}) {
		t.Fatalf("Guarantees = %v, %v; want red's 2 × ml.p5.48xlarge only", got, err)
	}
	c := contract("red", "hyperpod-ns-red", "")
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 3}}
	if _, _, err := f.db.SaveContract(ctx, conn.ID, 1, c, f.owner, f.tick()); err != nil {
		t.Fatal(err)
	}
	f.transition(conn.ID, workflow.EventSubmit, f.owner, "")
	if got, _ := f.db.Guarantees(ctx, "red"); got["red"][0].Count != 2 {
		t.Errorf("a submitted change counted: %v", got)
	}
	if got, _ := f.db.Guarantees(ctx, "blue"); len(got) != 0 {
		t.Errorf("blue's draft counted: %v", got)
	}
}

func TestHasUsage(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	if has, err := db.HasUsage(ctx); err != nil || has {
		t.Fatalf("fresh database HasUsage = %v, %v", has, err)
	}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "c", InstanceType: "t", Start: at}}); err != nil {
		t.Fatal(err)
	}
	if has, err := db.HasUsage(ctx); err != nil || !has {
		t.Errorf("with a cluster hour HasUsage = %v, %v", has, err)
	}
}
