package store_test

import (
	"testing"
)

// Every write to an input of the month's chargeback bumps the cost input
// version in its own transaction, whoever writes it (here: plain SQL, as a
// test or an operator would); a write elsewhere does not. Pages cache the
// chargeback per version (internal/web, monthCache), so a write this
// misses would leave every replica showing a stale figure.
func TestCostInputVersionFollowsEveryInput(t *testing.T) {
	db, _ := openDB(t, true)
	ctx := t.Context()
	version := func() int64 {
		t.Helper()
		v, err := db.CostInputVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	prev := version()
	for _, w := range []struct{ what, sql string }{
		{"usage row inserted", `INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s) VALUES ('red', 'ns', 't', '2026-11-01T00:00:00Z', 3600)`},
		{"usage row updated", `UPDATE usage_hours SET borrowed_accel_s = 60 WHERE team = 'red'`},
		{"usage row deleted", `DELETE FROM usage_hours WHERE team = 'red'`},
		{"capacity row inserted", `INSERT INTO usage_cluster_hours (cluster, instance_type, hour, capacity_accel_s) VALUES ('c', 't', '2026-11-01T00:00:00Z', 7200)`},
		{"capacity row updated", `UPDATE usage_cluster_hours SET allocated_accel_s = 60`},
		{"capacity row deleted", `DELETE FROM usage_cluster_hours`},
		{"missing period inserted", `INSERT INTO usage_missing (cluster, from_at, to_at, reason) VALUES ('c', '2026-11-01T00:00:00Z', '2026-11-01T01:00:00Z', 'down')`},
		{"missing period updated", `UPDATE usage_missing SET reason = 'portal down'`},
		{"missing period deleted", `DELETE FROM usage_missing`},
		{"guarantee inserted", `INSERT INTO team_capacity (team, instance_type, count) VALUES ('red', 't', 2)`},
		{"guarantee updated", `UPDATE team_capacity SET count = 3`},
		{"guarantee deleted", `DELETE FROM team_capacity`},
		{"cost policy chosen", `INSERT INTO cost_policies (version, method, overhead_bp, chosen_by, chosen_at, reason) VALUES (1, 'even', 100, 'f@example.test', '2026-11-01T00:00:00Z', 'test')`},
	} {
		if err := db.ExecForTest(ctx, w.sql); err != nil {
			t.Fatalf("%s: %v", w.what, err)
		}
		if v := version(); v <= prev {
			t.Errorf("%s: cost input version %d, was %d", w.what, v, prev)
		} else {
			prev = v
		}
	}
	if err := db.ExecForTest(ctx, `INSERT INTO cluster_inventory (cluster_name, instance_type, count, updated_at) VALUES ('c', 't', 4, '2026-11-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != prev {
		t.Errorf("a write outside the chargeback's inputs bumped the version from %d to %d", prev, v)
	}
}
