package store_test

import (
	"errors"
	"testing"

	"github.com/hyperpod-governance/portal/internal/collect/slurmusage"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestSlurmApprovalCountsTheSlurmNodes: a Slurm contract's approval is
// checked against the capacity its cluster's Slurm nodes give (the rows
// the Slurm usage reader writes), with the same rule as an EKS one: with
// two of three nodes drained or down, one instance is free and the
// contract's guarantee of two is refused as over capacity; with a node
// resumed, two fit and the approval passes.
func TestSlurmApprovalCountsTheSlurmNodes(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	observe := func(sinfo string) {
		t.Helper()
		nodes, err := slurm.ParseNodes([]byte(sinfo))
		if err != nil {
			t.Fatal(err)
		}
		rows := slurmusage.InventoryRows(nodes, map[string]string{"gpu": "ml.p5.48xlarge"})
		if err := f.db.ReplaceObserved(ctx, "shared-hp", rows, workflow.Actor{Email: "Slurm usage reader"}, f.tick()); err != nil {
			t.Fatal(err)
		}
	}
	c := contract("red", "hyperpod-ns-red", "")
	c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
	c.SlurmScope = workflow.SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "red-gpu"}
	if g := c.Scheduling.Guaranteed; len(g) != 1 || g[0].InstanceType != "ml.p5.48xlarge" || g[0].Count != 2 {
		t.Fatalf("the example's guarantee changed: %+v", g)
	}
	conn := f.submitted(c)
	observe("n1|gpu|gpu:8|idle\nn2|gpu|gpu:8|drained\nn3|gpu|gpu:8|down*\n")
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrOverCapacity) {
		t.Fatalf("approving 2 guaranteed with 1 usable node = %v; want ErrOverCapacity", err)
	}
	observe("n1|gpu|gpu:8|idle\nn2|gpu|gpu:8|mixed\nn3|gpu|gpu:8|down*\n")
	if _, _, err := f.db.Approve(ctx, conn.ID, f.admins[0], f.pin(conn.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil {
		t.Fatalf("approving 2 guaranteed with 2 usable nodes: %v", err)
	}
}
