package store_test

import (
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
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

// SeedUsage writes everything or nothing, and nothing on a database that
// already has usage (a measured cluster hour is enough).
func TestSeedUsageOnlyOnAnEmptyDatabase(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	hours := []usage.Hour{{Team: "red", Namespace: "ns", InstanceType: "t", Start: at, GuaranteedAccelSeconds: 5, Source: usage.SourceDemo}}
	miss := []usage.Missing{{Cluster: "c", From: at, To: at.Add(time.Hour), Reason: "demo"}}
	// A bad row fails the whole seed: no row of it is kept.
	bad := append(hours, usage.Hour{Team: "red", Namespace: "ns", InstanceType: "t", Start: at.Add(time.Minute)})
	if ok, err := db.SeedUsage(ctx, bad, nil, miss); err == nil || ok {
		t.Fatalf("seeding an hour that does not start on the hour = %v, %v", ok, err)
	}
	if got, _ := db.UsageHours(ctx, store.UsageFilter{From: at, To: at.Add(2 * time.Hour)}); len(got) != 0 {
		t.Fatalf("a failed seed kept %d rows", len(got))
	}
	if ok, err := db.SeedUsage(ctx, hours, nil, miss); err != nil || !ok {
		t.Fatalf("first seed = %v, %v", ok, err)
	}
	if ok, err := db.SeedUsage(ctx, hours, nil, miss); err != nil || ok {
		t.Errorf("second seed = %v, %v; want nothing written", ok, err)
	}
	if m, _ := db.MissingIn(ctx, at, at.Add(time.Hour)); len(m) != 1 {
		t.Errorf("%d missing periods after two seeds", len(m))
	}
	other, _ := openDB(t, true)
	if err := other.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "c", InstanceType: "t", Start: at}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.SeedUsage(ctx, hours, nil, nil); err != nil || ok {
		t.Errorf("seed over a measured cluster hour = %v, %v", ok, err)
	}
}
