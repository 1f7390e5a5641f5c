package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The capacity approvals count is the observed inventory with the manual
// overrides winning, read inside the approval's transaction.
func TestObservedInventoryWithManualOverride(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	admin := f.admins[0]
	const p5, g5, trn = "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge"
	rows := []store.ObservedRow{
		{InstanceType: p5, Capacity: 6, Basis: "nodes", GroupCurrent: 8, GroupTarget: 8, Nodes: 8, NodesSchedulable: 6},
		{InstanceType: g5, Capacity: 4, Basis: "instance groups", GroupCurrent: 4, GroupTarget: 5, Nodes: -1, NodesSchedulable: -1},
		{InstanceType: trn, Capacity: 2, Basis: "nodes", GroupCurrent: -1, GroupTarget: -1, Nodes: 2, NodesSchedulable: 2},
	}
	if err := f.db.ReplaceObserved(ctx, "shared-hp", rows, admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	// A manual override wins over the observed count of its type.
	if err := f.db.SetInventory(ctx, "shared-hp", g5, 1, admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	inv, err := f.db.Inventory(ctx, "shared-hp")
	if want := map[string]int{p5: 6, g5: 1, trn: 2}; err != nil || fmt.Sprint(inv) != fmt.Sprint(want) {
		t.Errorf("Inventory = %v, %v; want %v", inv, err, want)
	}
	got, err := f.db.Observed(ctx, "shared-hp")
	if err != nil || len(got) != 3 || got[1] != (store.ObservedRow{InstanceType: p5, Capacity: 6, Basis: "nodes", GroupCurrent: 8, GroupTarget: 8, Nodes: 8, NodesSchedulable: 6, ObservedBy: admin.Email, ObservedAt: got[1].ObservedAt}) || got[0].Nodes != -1 {
		t.Errorf("Observed = %+v, %v", got, err)
	}
	// A refresh replaces the observation: a type the cluster lost is gone.
	if err := f.db.ReplaceObserved(ctx, "shared-hp", rows[:1], admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	inv, _ = f.db.Inventory(ctx, "shared-hp")
	if want := map[string]int{p5: 6, g5: 1}; fmt.Sprint(inv) != fmt.Sprint(want) {
		t.Errorf("after a second refresh: %v, want %v", inv, want)
	}
	if cl, err := f.db.Clusters(ctx); err != nil || fmt.Sprint(cl) != "[shared-hp]" {
		t.Errorf("Clusters = %v, %v", cl, err)
	}
	evs, err := f.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "cluster", ActionPrefix: "inventory.refresh"}, 0, 10)
	if err != nil || len(evs) != 2 || !strings.Contains(evs[len(evs)-1].Reason, p5+" = 6 (nodes)") {
		t.Errorf("refresh audit events = %+v, %v", evs, err)
	}

	// Approval counts the observed capacity: 7 × p5 does not fit in 6.
	c := contract("gold", "ns-gold", "")
	c.ClusterName = "shared-hp"
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: p5, Count: 7}}
	target := f.submitted(c)
	if _, _, err := f.db.Approve(ctx, target.ID, admin, f.pin(target.ID), "ok", workflow.ClusterFacts{}, f.tick()); !errors.Is(err, workflow.ErrOverCapacity) {
		t.Errorf("Approve of 7 on 6 observed = %v, want over capacity", err)
	}
	// The admin overrides p5 to 8 (the cluster cannot tell of two nodes
	// coming back from a reboot, say): now it fits.
	if err := f.db.SetInventory(ctx, "shared-hp", p5, 8, admin, f.tick()); err != nil {
		t.Fatal(err)
	}
	if got, _, err := f.db.Approve(ctx, target.ID, admin, f.pin(target.ID), "ok", workflow.ClusterFacts{}, f.tick()); err != nil || got.State != workflow.StateApproved {
		t.Errorf("Approve with the override = %s, %v", got.State, err)
	}
}
