package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestSlurmPartitionUses: the readiness check's partitions are those of
// the approved Slurm contracts, not of a submitted one or an EKS one.
func TestSlurmPartitionUses(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	settings := provision.DefaultClusterSettings()
	file := func(team, partition string, approve bool) {
		t.Helper()
		u, err := db.RecordLogin(ctx, "https://idp.example.test", "u-"+team, team+"@example.test", team, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		by := workflow.Actor{ID: u.ID, Email: u.Email}
		c := workflow.ExampleContractFor(team)
		if partition != "" {
			c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
			c.SlurmScope = workflow.SlurmScope{Account: team, Partition: partition, QoS: team + "-gpu"}
		}
		for _, g := range c.Scheduling.Guaranteed { // room for every approval
			if err := db.SetInventory(ctx, c.ClusterName, g.InstanceType, 100, by, now); err != nil {
				t.Fatal(err)
			}
		}
		conn, err := db.CreateConnection(ctx, c, by, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Transition(ctx, conn.ID, workflow.EventSubmit, by, "", store.Expect{}, now); err != nil {
			t.Fatal(err)
		}
		if !approve {
			return
		}
		ver, err := db.Version(ctx, conn.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := provision.BuildPlan(conn.ID, 1, ver.Hash, ver.Contract, settings)
		if err != nil {
			t.Fatal(err)
		}
		a, err := db.RecordLogin(ctx, "https://idp.example.test", "admin-"+team, "admin-"+team+"@example.test", "admin", nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.Approve(ctx, conn.ID, workflow.Actor{ID: a.ID, Email: a.Email}, store.Expect{Version: 1, Hash: ver.Hash, PlanHash: plan.Hash()}, "ok", workflow.ClusterFacts{}, now); err != nil {
			t.Fatal(err)
		}
	}
	file("red", "gpu", true)
	file("blue", "big", false) // submitted, not approved
	file("green", "", true)    // EKS
	got, err := slurmPartitionUses(db)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []provision.SlurmPartitionUse{{Partition: "gpu", Team: "red"}}; !slices.Equal(got, want) {
		t.Errorf("slurmPartitionUses = %+v, want %+v", got, want)
	}
}
