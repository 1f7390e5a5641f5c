package store

import (
	"context"
	"fmt"

	"github.com/hyperpod-governance/portal/internal/usage"
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

// GuaranteeHistory returns each team's guaranteed instances per instance
// type over time (team "" every team's), from team_guarantee_history,
// which apply keeps beside team_capacity (capacity.go): each step is in
// force from the moment the command that changed the guarantee was
// recorded. For an amendment that is when its job applied it on the
// cluster (the approved version moves only then); for a new connection, its
// approval (its namespace and queue exist only once provisioned, so no
// usage precedes it); for a revocation, when its job removed the queue.
// Guarantees in force before the history was kept start at the zero time.
func (d *DB) GuaranteeHistory(ctx context.Context, team string) (usage.GuaranteeHistory, error) {
	rows, err := d.sql.QueryContext(ctx, `
SELECT team, instance_type, from_at, count FROM team_guarantee_history WHERE (? = '' OR team = ?)
ORDER BY team, instance_type, from_at`, team, team)
	if err != nil {
		return nil, fmt.Errorf("store: guarantee history: %w", err)
	}
	defer rows.Close()
	out := usage.GuaranteeHistory{}
	for rows.Next() {
		var t, itype, from string
		var n int64
		if err := rows.Scan(&t, &itype, &from, &n); err != nil {
			return nil, fmt.Errorf("store: guarantee history: %w", err)
		}
		at, err := parseTime(from)
		if err != nil {
			return nil, err
		}
		out.Add(t, itype, at, n)
	}
	return out, rows.Err()
}
