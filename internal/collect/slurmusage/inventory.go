package slurmusage

import (
	"context"
	"fmt"
	"strings"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// inventoryActor is who the audit trail names for the reader's inventory
// writes.
var inventoryActor = workflow.Actor{Email: "Slurm usage reader"}

// InventoryRows are the observed rows of a Slurm cluster's nodes: per
// instance type (each partition's, partitionTypes), the nodes and, as
// the capacity and the schedulable nodes, those that can be allocated new
// work (slurm.UsableState: not drained, draining, down, failing, not
// responding, ...). Basis slurm.BasisNodes; the instance groups are not
// read (-1). Sorted by instance type.
func InventoryRows(nodes []slurm.Node, partitionTypes map[string]string) []store.ObservedRow {
	caps := slurm.Capacity(nodes, partitionTypes)
	rows := make([]store.ObservedRow, 0, len(caps))
	for _, c := range caps {
		rows = append(rows, store.ObservedRow{InstanceType: c.InstanceType, Capacity: c.Usable, Basis: slurm.BasisNodes,
			GroupCurrent: -1, GroupTarget: -1, Nodes: c.Nodes, NodesSchedulable: c.Usable})
	}
	return rows
}

// inventoryKey is what of the rows is compared: the counts and the basis,
// not who observed them when.
func inventoryKey(rows []store.ObservedRow) string {
	var b strings.Builder
	for _, r := range rows { // both sides sorted by instance type
		fmt.Fprintf(&b, "%s=%d/%d/%d/%s;", r.InstanceType, r.Capacity, r.Nodes, r.NodesSchedulable, r.Basis)
	}
	return b.String()
}

// RefreshInventory reads the Slurm nodes and, when their counts differ from
// the stored inventory of InventoryCluster, replaces it (audited) and calls
// InventoryChanged. It reports whether it wrote; without InventoryCluster
// it does nothing.
func (r *Reader) RefreshInventory(ctx context.Context) (bool, error) {
	if r.InventoryCluster == "" {
		return false, nil
	}
	nodes, err := slurm.Nodes(ctx, r.Runner)
	if err != nil {
		return false, fmt.Errorf("slurm inventory: %w", err)
	}
	rows := InventoryRows(nodes, r.InstanceTypes)
	stored, err := r.Store.Observed(ctx, r.InventoryCluster)
	if err != nil {
		return false, err
	}
	key := inventoryKey(rows)
	if key == inventoryKey(stored) {
		return false, nil
	}
	if err := r.Store.ReplaceObserved(ctx, r.InventoryCluster, rows, inventoryActor, r.now()); err != nil {
		return false, fmt.Errorf("slurm inventory: %w", err)
	}
	r.logger().Info("Slurm inventory changed", "cluster", r.InventoryCluster, "inventory", key)
	if r.InventoryChanged != nil {
		r.InventoryChanged()
	}
	return true, nil
}
