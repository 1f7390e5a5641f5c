package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// ObservedRow is one instance type of a cluster as the last refresh from
// the cluster saw it. Capacity is what approvals count unless a manual row
// (SetInventory) overrides it; Basis says where it came from ("nodes" or
// "instance groups"). The counts are -1 where their source was not read.
type ObservedRow struct {
	InstanceType              string
	Capacity                  int
	Basis                     string
	GroupCurrent, GroupTarget int
	Nodes, NodesSchedulable   int
	ObservedBy                string
	ObservedAt                time.Time
}

// ReplaceObserved replaces a cluster's observed inventory with rows (a
// refresh from the cluster), with an audit event naming what changed the
// capacity approvals count. Types absent from rows are removed: the cluster
// no longer has them.
func (d *DB) ReplaceObserved(ctx context.Context, cluster string, rows []ObservedRow, by workflow.Actor, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM cluster_observed WHERE cluster_name = ?`, cluster); err != nil {
			return fmt.Errorf("store: replace observed inventory: %w", err)
		}
		parts := make([]string, 0, len(rows))
		for _, r := range rows {
			if _, err := tx.ExecContext(ctx, `
INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, group_current, group_target, nodes, nodes_schedulable, observed_by, observed_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				cluster, r.InstanceType, r.Capacity, r.Basis, nullCount(r.GroupCurrent), nullCount(r.GroupTarget),
				nullCount(r.Nodes), nullCount(r.NodesSchedulable), nullID(by.ID), fmtTime(now)); err != nil {
				return fmt.Errorf("store: replace observed inventory: %w", err)
			}
			parts = append(parts, fmt.Sprintf("%s = %d (%s)", r.InstanceType, r.Capacity, r.Basis))
		}
		what := "no instance types"
		if len(parts) > 0 {
			what = strings.Join(parts, ", ")
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "inventory.refresh",
			ObjectType: "cluster", Reason: cluster + " from the cluster: " + what})
	})
}

// Observed returns a cluster's observed inventory, by instance type.
func (d *DB) Observed(ctx context.Context, cluster string) ([]ObservedRow, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT o.instance_type, o.capacity, o.basis, coalesce(o.group_current, -1), coalesce(o.group_target, -1),
       coalesce(o.nodes, -1), coalesce(o.nodes_schedulable, -1), coalesce(u.email, ''), o.observed_at
FROM cluster_observed o LEFT JOIN users u ON u.id = o.observed_by
WHERE o.cluster_name = ? ORDER BY o.instance_type`, cluster)
	if err != nil {
		return nil, fmt.Errorf("store: observed inventory: %w", err)
	}
	defer rows.Close()
	var out []ObservedRow
	for rows.Next() {
		var r ObservedRow
		var at string
		if err := rows.Scan(&r.InstanceType, &r.Capacity, &r.Basis, &r.GroupCurrent, &r.GroupTarget, &r.Nodes, &r.NodesSchedulable, &r.ObservedBy, &at); err != nil {
			return nil, fmt.Errorf("store: observed inventory: %w", err)
		}
		if r.ObservedAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("store: observed inventory: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ManualInventory returns a cluster's manual overrides (SetInventory), by
// instance type.
func (d *DB) ManualInventory(ctx context.Context, cluster string) (map[string]int, error) {
	return countsByType(ctx, d.sql, `SELECT instance_type, count FROM cluster_inventory WHERE cluster_name = ?`, cluster)
}

func countsByType(ctx context.Context, q queryer, query, cluster string) (map[string]int, error) {
	rows, err := q.QueryContext(ctx, query, cluster)
	if err != nil {
		return nil, fmt.Errorf("store: inventory: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var t string
		var n int
		if err := rows.Scan(&t, &n); err != nil {
			return nil, fmt.Errorf("store: inventory: %w", err)
		}
		out[t] = n
	}
	return out, rows.Err()
}

func nullCount(n int) any {
	if n < 0 {
		return nil
	}
	return n
}

// NamespaceOwner returns the id of another connection that holds ns (see
// otherClaimingVersions: a version that was submitted, of a connection that is
// neither a draft nor ended), or 0.
func (d *DB) NamespaceOwner(ctx context.Context, ns string, exclude int64) (int64, error) {
	return namespaceOwner(ctx, d.sql, ns, exclude)
}

func namespaceOwner(ctx context.Context, q queryer, ns string, exclude int64) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT c.id`+otherClaimingVersions+`
  AND (' ' || cv.namespaces || ' ') LIKE ? ESCAPE '\' LIMIT 1`, exclude, "% "+likeEscape(ns)+" %").Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: namespace owner: %w", err)
	}
	return id, nil
}

// CommittedCapacity is the guaranteed capacity of every other committed
// connection on the cluster (by its approved version).
func (d *DB) CommittedCapacity(ctx context.Context, cluster string, exclude int64) ([]workflow.Capacity, error) {
	return committedCapacity(ctx, d.sql, cluster, exclude)
}

// inventory is the capacity approvals count, per instance type: the
// observed capacity of the last refresh from the cluster (cluster_observed),
// with every manual row (cluster_inventory) overriding its type.
func inventory(ctx context.Context, q queryer, cluster string) (map[string]int, error) {
	out, err := countsByType(ctx, q, `SELECT instance_type, capacity FROM cluster_observed WHERE cluster_name = ?`, cluster)
	if err != nil {
		return nil, err
	}
	manual, err := countsByType(ctx, q, `SELECT instance_type, count FROM cluster_inventory WHERE cluster_name = ?`, cluster)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, manual)
	return out, nil
}

// Inventory returns a cluster's capacity per instance type: observed, with
// the manual overrides winning.
func (d *DB) Inventory(ctx context.Context, cluster string) (map[string]int, error) {
	return inventory(ctx, d.sql, cluster)
}

// SetInventory sets (count > 0) or removes (count == 0) the manual override
// of one instance type of a cluster's inventory, with an audit event. An
// override wins over what a refresh from the cluster observed.
func (d *DB) SetInventory(ctx context.Context, cluster, instanceType string, count int, by workflow.Actor, now time.Time) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if count == 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM cluster_inventory WHERE cluster_name = ? AND instance_type = ?`, cluster, instanceType)
		} else {
			_, err = tx.ExecContext(ctx, `
INSERT INTO cluster_inventory (cluster_name, instance_type, count, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (cluster_name, instance_type) DO UPDATE SET count = excluded.count, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
				cluster, instanceType, count, nullID(by.ID), fmtTime(now))
		}
		if err != nil {
			return fmt.Errorf("store: set inventory: %w", err)
		}
		return appendAudit(ctx, tx, AuditEvent{At: now, ActorID: by.ID, Actor: by.Email, Action: "inventory.set",
			ObjectType: "cluster", Reason: fmt.Sprintf("%s %s = %d", cluster, instanceType, count)})
	})
}

// Clusters lists the cluster names that have an inventory (manual or
// observed).
func (d *DB) Clusters(ctx context.Context) ([]string, error) {
	return column[string](ctx, d.sql, `SELECT cluster_name FROM cluster_inventory UNION SELECT cluster_name FROM cluster_observed ORDER BY cluster_name`)
}
