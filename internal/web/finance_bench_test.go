package web

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// financeBenchNow is the benchmark's clock: mid-month, so the month to date
// and last month each hold half of the seeded 30 days.
var financeBenchNow = time.Date(2026, 11, 16, 0, 30, 0, 0, time.UTC)

// seedCostScale fills the usage tables like a large cluster: 200 teams,
// each with one active connection guaranteeing 2 × ml.p5.48xlarge, one
// namespace and one instance type, and 30 days of hourly rows each
// (144,000 rows), plus the cluster's capacity for every hour. Generated in
// SQL so seeding takes seconds.
func seedCostScale(tb testing.TB, h *harness) {
	tb.Helper()
	const teams, hours = 200, 30 * 24
	start := financeBenchNow.Add(-hours * time.Hour).Truncate(time.Hour)
	from := start.Format("2006-01-02 15:04:05")
	hourExpr := /* inside the Sprintf formats below */ `strftime('%%Y-%%m-%%dT%%H:00:00.000000000Z', '` + from + `', '+' || h.i || ' hours')`
	body := strings.ReplaceAll(string(workflow.ExampleContract().Canonical()), "'", "''")
	hash := workflow.ExampleContract().Hash()
	err := h.db.ExecForTest(context.Background(),
		`INSERT INTO users (issuer, subject, email, name, groups_json, first_login_at, last_login_at)
		 VALUES ('seed', 'seed', 'seed@example.test', 'Seed', '[]', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		fmt.Sprintf(`INSERT INTO connections (id, team, state, cluster_name, purpose, current_version, approved_version, requester_id, created_at, updated_at, submitted_at)
		 WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < %d)
		 SELECT i + 1, printf('team-%%03d', i), 'active', 'shared-hp', 'Seeded connection ' || i, 1, 1, (SELECT id FROM users WHERE subject = 'seed'),
		        '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z' FROM n`, teams-1),
		`INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
		 SELECT id, 1, '`+body+`', '`+hash+`', 'ns-' || team, requester_id, created_at FROM connections`,
		`INSERT INTO version_capacity (connection_id, version, instance_type, count)
		 SELECT id, 1, 'ml.p5.48xlarge', 2 FROM connections`,
		fmt.Sprintf(`INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s, running, pending, preempted)
		 WITH RECURSIVE t(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM t WHERE i < %d),
		                h(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM h WHERE i < %d)
		 SELECT printf('team-%%03d', t.i), printf('hyperpod-ns-team-%%03d', t.i), 'ml.p5.48xlarge', `+hourExpr+`,
		        ((t.i + h.i) %% 17) * 900, ((t.i * 7 + h.i) %% 5) * 600, 96000 * 3600, 1024 * 3600, 1 + (t.i %% 3), t.i %% 2, (h.i %% 24 = 0)
		 FROM t, h`, teams-1, hours-1),
		fmt.Sprintf(`INSERT INTO usage_cluster_hours (cluster, instance_type, hour, capacity_accel_s, allocated_accel_s)
		 WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM h WHERE i < %d)
		 SELECT 'shared-hp', 'ml.p5.48xlarge', `+hourExpr+`, 3200 * 3600,
		        (SELECT SUM(guaranteed_accel_s + borrowed_accel_s) FROM usage_hours u WHERE u.hour = `+hourExpr+`) FROM h`, hours-1),
	)
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkFinancePages serves the money pages as finance at 200 teams ×
// 30 days of hourly rows (144,000 rows) with the cluster's hours: /finance
// (month to date and the preview under every policy), a team's usage page
// (with its cost block) and a team's statement of the current month.
//
//	go test -run '^$' -bench FinancePages -benchmem -benchtime 10x ./internal/web
func BenchmarkFinancePages(b *testing.B) {
	// Sign in on the real clock (the IdP's tokens carry it), then fix it.
	var fixed bool
	h := newHarness(b, false, withRateCard(b), func(o *Options) {
		// The statement route serves the groups file's teams only: the
		// seeded team the benchmark reads is one.
		o.Mapping.Teams = maps.Clone(o.Mapping.Teams)
		o.Mapping.Teams["team-007"] = auth.TeamGroups{Owners: []string{"team-007-owners"}}
		o.Now = func() time.Time {
			if fixed {
				return financeBenchNow
			}
			return time.Now()
		}
	})
	seedCostScale(b, h)
	fin := h.signIn("finance")
	fixed = true
	for _, page := range []struct{ name, path string }{
		{"finance", "/finance"},
		{"team_usage", "/teams/team-007/usage"},
		{"statement", "/teams/team-007/statements/2026-11"},
	} {
		b.Run(page.name, func(b *testing.B) {
			url := h.base + page.path
			for b.Loop() {
				resp, err := fin.c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s = %d", url, resp.StatusCode)
				}
			}
		})
	}
}
