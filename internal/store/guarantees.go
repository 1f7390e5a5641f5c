package store

import (
	"context"
	"fmt"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Guarantees returns each team's guaranteed capacity in force: the sum, per
// instance type, of the approved versions of its committed connections
// (approved, provisioning, active, under review, revoking). An open change
// is not in force until approved. team "" returns every team's.
//
// They are read from team_capacity, which apply keeps in the transaction
// that changes a connection (capacity.go), not summed over the connections.
func (d *DB) Guarantees(ctx context.Context, team string) (map[string][]workflow.Capacity, error) {
	q, args := `SELECT team, instance_type, count FROM team_capacity ORDER BY team, instance_type`, []any(nil)
	if team != "" {
		q, args = `SELECT team, instance_type, count FROM team_capacity WHERE team = ? ORDER BY instance_type`, []any{team}
	}
	rows, err := d.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: guarantees: %w", err)
	}
	defer rows.Close()
	out := map[string][]workflow.Capacity{}
	for rows.Next() {
		var t string
		var c workflow.Capacity
		if err := rows.Scan(&t, &c.InstanceType, &c.Count); err != nil {
			return nil, fmt.Errorf("store: guarantees: %w", err)
		}
		out[t] = append(out[t], c)
	}
	return out, rows.Err()
}
