package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Guarantees returns each team's guaranteed capacity in force: the sum, per
// instance type, of the approved versions of its committed connections
// (approved, provisioning, active, under review, revoking). An open change
// is not in force until approved. team "" returns every team's.
func (d *DB) Guarantees(ctx context.Context, team string) (map[string][]workflow.Capacity, error) {
	ph := strings.TrimSuffix(strings.Repeat("?,", len(liveStates)), ",")
	args := []any{team, team}
	for _, s := range liveStates {
		args = append(args, s)
	}
	rows, err := d.sql.QueryContext(ctx, `
SELECT c.team, vc.instance_type, SUM(vc.count) FROM connections c
JOIN version_capacity vc ON vc.connection_id = c.id AND vc.version = c.approved_version
WHERE (? = '' OR c.team = ?) AND c.state IN (`+ph+`)
GROUP BY c.team, vc.instance_type ORDER BY c.team, vc.instance_type`, args...)
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
