package collect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The cluster's inventory, kept from the node informer: what approvals
// count (store.Inventory: these observed rows, with an admin's manual rows
// winning) and what the review scheduler's capacity trigger watches. It is
// the admin's "Refresh from cluster" (provision.ClusterChecker.ReadInventory)
// done by the collector whenever the nodes change: per HyperPod instance
// type, the nodes, the schedulable ones (provision.NodeSchedulable: HyperPod
// labels them Schedulable and they are not cordoned) and, as the capacity,
// the schedulable ones.
//
// Debounced: node events only note that the counts changed; a flush writes
// them once they have not changed for InventorySettle (a node pool being
// drained or replaced node by node gives one write and one audit event, not
// one per node), or at the latest inventoryMaxDelay settles after the first
// change not yet written (nodes that never stop flapping still show).
// Nothing is written when the counts equal what is stored, so a restart
// writes nothing.

// DefaultInventorySettle is how long the node counts must hold before the
// collector writes them.
const DefaultInventorySettle = 30 * time.Second

// inventoryMaxDelay bounds the wait for the counts to settle, in settles.
const inventoryMaxDelay = 10

// inventoryActor is who the audit trail names for the collector's writes.
var inventoryActor = workflow.Actor{Email: "usage collector"}

func (c *Collector) settle() time.Duration {
	if c.InventorySettle > 0 {
		return c.InventorySettle
	}
	return DefaultInventorySettle
}

// nodesChanged notes that the node counts may have changed at now. The
// caller holds mu.
func (c *Collector) nodesChanged(now time.Time) {
	if c.InventoryCluster == "" {
		return
	}
	if c.invPendingSince.IsZero() {
		c.invPendingSince = now
	}
	c.invChangedAt = now
}

// inventoryRows are the observed rows of the nodes followed, sorted by
// instance type. The caller holds mu.
func (c *Collector) inventoryRows() []store.ObservedRow {
	by := map[string]*store.ObservedRow{}
	for _, st := range c.nodes {
		t := st.span.InstanceType
		if !provision.HyperPodInstanceType(t) {
			continue
		}
		r := by[t]
		if r == nil {
			r = &store.ObservedRow{InstanceType: t, Basis: provision.BasisNodes, GroupCurrent: -1, GroupTarget: -1}
			by[t] = r
		}
		r.Nodes++
		if st.span.Schedulable {
			r.NodesSchedulable++
			r.Capacity++
		}
	}
	rows := make([]store.ObservedRow, 0, len(by))
	for _, r := range by {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b store.ObservedRow) int { return strings.Compare(a.InstanceType, b.InstanceType) })
	return rows
}

// inventoryKey is what of the rows the collector compares: the counts,
// not who observed them when (nor an earlier refresh's instance groups).
func inventoryKey(rows []store.ObservedRow) string {
	var b strings.Builder
	for _, r := range slices.SortedFunc(slices.Values(rows), func(a, b store.ObservedRow) int {
		return strings.Compare(a.InstanceType, b.InstanceType)
	}) {
		fmt.Fprintf(&b, "%s=%d/%d/%d;", r.InstanceType, r.Capacity, r.Nodes, r.NodesSchedulable)
	}
	return b.String()
}

// loadInventory reads what is stored, so that the first flush writes only
// a difference.
func (c *Collector) loadInventory(ctx context.Context, now time.Time) error {
	if c.InventoryCluster == "" {
		return nil
	}
	rows, err := c.Store.Observed(ctx, c.InventoryCluster)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.invWritten = inventoryKey(rows)
	c.invPendingSince, c.invChangedAt = time.Time{}, time.Time{}
	c.nodesChanged(now) // compare once the informer has delivered every node
	c.mu.Unlock()
	return nil
}

// flushInventory writes the node counts when they changed and have
// settled (see above).
func (c *Collector) flushInventory(ctx context.Context, now time.Time) error {
	if c.InventoryCluster == "" {
		return nil
	}
	settle := c.settle()
	c.mu.Lock()
	changed, pending := c.invChangedAt, c.invPendingSince
	if !c.synced || pending.IsZero() || (now.Sub(changed) < settle && now.Sub(pending) < inventoryMaxDelay*settle) {
		c.mu.Unlock()
		return nil
	}
	rows, written := c.inventoryRows(), c.invWritten
	c.mu.Unlock()
	key := inventoryKey(rows)
	if key != written {
		if err := c.Store.ReplaceObserved(ctx, c.InventoryCluster, rows, inventoryActor, now); err != nil {
			return fmt.Errorf("usage collector: inventory: %w", err)
		}
		c.logger().Info("usage collector: inventory changed", "cluster", c.InventoryCluster, "inventory", key)
		if c.InventoryChanged != nil {
			c.InventoryChanged()
		}
	}
	c.mu.Lock()
	c.invWritten = key
	if c.invChangedAt.Equal(changed) {
		c.invPendingSince, c.invChangedAt = time.Time{}, time.Time{}
	}
	c.mu.Unlock()
	return nil
}
