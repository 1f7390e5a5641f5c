package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Per-cluster capacity totals (issue 15, migration 00021). The capacity a
// committed connection (workflow.State.Committed) holds on its cluster,
// per instance type, is the larger of its approved version's count and,
// while an approved change is applied (workflow.Amendment.Committed:
// approved, or failed and waiting to be tried again), its current
// version's: an approved increase is committed from its approval on.
// cluster_capacity keeps the sum of that over every committed connection
// of a cluster, so that the detail page and an approval read one row per
// instance type instead of summing every committed connection on every
// view.
//
// apply keeps it: a command that writes a connection's row reads what the
// connection held before and after, in the same transaction, and adds the
// difference (capacityDelta). apply is the only writer of connections and
// of contract versions, so every change that moves held capacity (approve,
// amend, complete or fail a job, revoke, hold, ...) passes through it; the
// store tests check after each that the totals equal the sum recomputed
// from the rows (TestCapacityTotalsFollowEveryChange, and every fixture's
// cleanup).

// The capacity-holding rule is workflow's (State.Committed, over
// workflow.CommittedStates, and Amendment.Committed, over
// workflow.CommittedAmendments); the SQL below is built from those lists,
// and TestCapacityHoldingStatesAgree fails when the two disagree.
var (
	committedStatesSQL     = sqlList(workflow.CommittedStates)
	committedAmendmentsSQL = sqlList(workflow.CommittedAmendments)
	// liveStatesSQL is workflow.LiveStates (State.Live): the connections
	// that run on the cluster, which the scheduler, the drift check and
	// the end-date rule read.
	liveStatesSQL = sqlList(workflow.LiveStates)
)

// sqlList is the constants xs as an SQL list of literals: "'a', 'b'".
// They are the workflow package's own names, never input; one with a
// quote would be a programming error.
func sqlList[T ~string](xs []T) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		if strings.ContainsAny(string(x), `'\`) {
			panic(fmt.Sprintf("store: %q cannot be an SQL literal", x))
		}
		q[i] = "'" + string(x) + "'"
	}
	return strings.Join(q, ", ")
}

// heldSQL selects (cluster_name, t, n): what each committed connection
// matching where holds, per instance type.
func heldSQL(where string) string {
	return `
  SELECT c.cluster_name AS cluster_name, vc.instance_type AS t, MAX(vc.count) AS n FROM connections c
  JOIN version_capacity vc ON vc.connection_id = c.id
   AND (vc.version = c.approved_version OR (c.amendment IN (` + committedAmendmentsSQL + `) AND vc.version = c.current_version))
  WHERE c.state IN (` + committedStatesSQL + `)` + where + `
  GROUP BY c.id, c.cluster_name, vc.instance_type`
}

// teamHeldSQL selects (team, t, n): each committed connection matching
// where, its approved version's count per instance type (a team's
// guarantee in force: an open change is not, until applied).
func teamHeldSQL(where string) string {
	return `
  SELECT c.team AS team, vc.instance_type AS t, vc.count AS n FROM connections c
  JOIN version_capacity vc ON vc.connection_id = c.id AND vc.version = c.approved_version
  WHERE c.state IN (` + committedStatesSQL + `)` + where
}

// RebuildCapacityTotalsSQL recomputes cluster_capacity and team_capacity
// from the rows, into the emptied tables. The portal never needs it (apply
// keeps the totals); tests and benchmarks that insert connections around
// the store run it after.
// The guarantee history is started again from the totals, in force since
// the earliest time (as migration 00026 starts it).
var RebuildCapacityTotalsSQL = []string{
	`DELETE FROM cluster_capacity`,
	`DELETE FROM team_capacity`,
	`DELETE FROM team_guarantee_history`,
	`INSERT INTO cluster_capacity (cluster_name, instance_type, count) ` + recomputedClusterSQL,
	`INSERT INTO team_capacity (team, instance_type, count) ` + recomputedTeamSQL,
	`INSERT INTO team_guarantee_history (team, instance_type, from_at, count) SELECT team, instance_type, '` + fmtTime(time.Time{}) + `', count FROM team_capacity`,
}

// recomputedClusterSQL and recomputedTeamSQL are what cluster_capacity and
// team_capacity must hold: the sums over the rows.
var (
	recomputedClusterSQL = `SELECT cluster_name, t, SUM(n) FROM (` + heldSQL("") + `) AS per_connection
GROUP BY cluster_name, t HAVING SUM(n) <> 0`
	recomputedTeamSQL = `SELECT team, t, SUM(n) FROM (` + teamHeldSQL("") + `) AS per_connection
GROUP BY team, t HAVING SUM(n) <> 0`
)

// holding is what a connection holds: on its cluster, per instance type
// (cluster), and as its team's guarantee (team). The keys are (cluster or
// team, instance type).
type holding struct{ cluster, team map[[2]string]int }

// heldBy is what connection id holds (nothing unless it is committed).
func heldBy(ctx context.Context, q queryer, id int64) (holding, error) {
	h := holding{cluster: map[[2]string]int{}, team: map[[2]string]int{}}
	for _, part := range []struct {
		q   string
		out map[[2]string]int
	}{{heldSQL(` AND c.id = ?`), h.cluster}, {teamHeldSQL(` AND c.id = ?`), h.team}} {
		if err := readHeld(ctx, q, part.q, id, part.out); err != nil {
			return holding{}, err
		}
	}
	return h, nil
}

func readHeld(ctx context.Context, q queryer, query string, id int64, out map[[2]string]int) error {
	rows, err := q.QueryContext(ctx, query, id)
	if err != nil {
		return fmt.Errorf("store: held capacity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k [2]string
		var n int
		if err := rows.Scan(&k[0], &k[1], &n); err != nil {
			return fmt.Errorf("store: held capacity: %w", err)
		}
		out[k] += n
	}
	return rows.Err()
}

// capacityDelta adds after - before to the cluster totals and the team
// guarantees, and records each team guarantee that changed in the
// guarantee history as in force from now.
func capacityDelta(ctx context.Context, tx *sql.Tx, before, after holding, now time.Time) error {
	if err := addDelta(ctx, tx, "cluster_capacity", "cluster_name", before.cluster, after.cluster); err != nil {
		return err
	}
	if err := addDelta(ctx, tx, "team_capacity", "team", before.team, after.team); err != nil {
		return err
	}
	for k := range after.team {
		if after.team[k] != before.team[k] {
			if err := guaranteeStep(ctx, tx, k, now); err != nil {
				return err
			}
		}
	}
	for k := range before.team {
		if _, ok := after.team[k]; !ok && before.team[k] != 0 {
			if err := guaranteeStep(ctx, tx, k, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// guaranteeStep records team k's guarantee on the instance type, as
// team_capacity now has it, in force from now (a second change in the same
// instant replaces the first's row).
func guaranteeStep(ctx context.Context, tx *sql.Tx, k [2]string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `
INSERT INTO team_guarantee_history (team, instance_type, from_at, count)
VALUES (?, ?, ?, COALESCE((SELECT count FROM team_capacity WHERE team = ? AND instance_type = ?), 0))
ON CONFLICT (team, instance_type, from_at) DO UPDATE SET count = excluded.count`, k[0], k[1], fmtTime(now), k[0], k[1]); err != nil {
		return fmt.Errorf("store: guarantee history: %w", err)
	}
	return nil
}

func addDelta(ctx context.Context, tx *sql.Tx, table, col string, before, after map[[2]string]int) error {
	delta := map[[2]string]int{}
	for k, n := range after {
		delta[k] += n
	}
	for k, n := range before {
		delta[k] -= n
	}
	for k, n := range delta {
		if n == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `
INSERT INTO `+table+` (`+col+`, instance_type, count) VALUES (?, ?, ?)
ON CONFLICT (`+col+`, instance_type) DO UPDATE SET count = `+table+`.count + excluded.count`, k[0], k[1], n); err != nil {
			return fmt.Errorf("store: %s: %w", table, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE `+col+` = ? AND instance_type = ? AND count = 0`, k[0], k[1]); err != nil {
			return fmt.Errorf("store: %s: %w", table, err)
		}
	}
	return nil
}

// committedCapacity is the capacity every committed connection of cluster but
// exclude holds, per instance type: the cluster's total less what exclude
// holds there, in one read of a row per instance type.
func committedCapacity(ctx context.Context, q queryer, cluster string, exclude int64) ([]workflow.Capacity, error) {
	rows, err := q.QueryContext(ctx, `
SELECT t.instance_type, t.count - COALESCE(h.n, 0) FROM cluster_capacity t
LEFT JOIN (`+heldSQL(` AND c.id = ? AND c.cluster_name = ?`)+`) AS h ON h.t = t.instance_type
WHERE t.cluster_name = ?`, exclude, cluster, cluster)
	if err != nil {
		return nil, fmt.Errorf("store: committed capacity: %w", err)
	}
	defer rows.Close()
	var out []workflow.Capacity
	for rows.Next() {
		var c workflow.Capacity
		if err := rows.Scan(&c.InstanceType, &c.Count); err != nil {
			return nil, fmt.Errorf("store: committed capacity: %w", err)
		}
		if c.Count != 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceType < out[j].InstanceType })
	return out, rows.Err()
}

// teamQueueStatesSQL is workflow.TeamQueueStates (State.InTeamQueue): the
// connections whose guarantee their team's ClusterQueue counts.
var teamQueueStatesSQL = sqlList(workflow.TeamQueueStates)

// TeamQueueVersions returns the approved versions of team's connections on
// cluster whose guarantee the team's ClusterQueue counts
// (workflow.TeamQueueStates), but connection except's, by connection id:
// what a job of connection except recomputes the team's queue from, read
// when it runs.
func (d *DB) TeamQueueVersions(ctx context.Context, team, cluster string, except int64) ([]Version, error) {
	rows, err := d.sql.QueryContext(ctx, `SELECT `+versionCols+`
JOIN connections c ON c.id = cv.connection_id AND cv.version = c.approved_version
WHERE c.team = ? AND c.cluster_name = ? AND c.id <> ? AND c.state IN (`+teamQueueStatesSQL+`)
ORDER BY c.id`, team, cluster, except)
	if err != nil {
		return nil, fmt.Errorf("store: team queue of %s: %w", team, err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("store: team queue of %s: %w", team, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
