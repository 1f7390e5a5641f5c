package store_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func openTB(tb testing.TB) *store.DB {
	tb.Helper()
	db, err := store.Open(tb.Context(), emptyDSN(tb, "portal.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(tb.Context()); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return db
}

// seedStates is a plausible mix for a portal that has run for a while:
// mostly live connections, some in review, some ended.
var seedStates = []workflow.State{
	workflow.StateActive, workflow.StateActive, workflow.StateActive, workflow.StateActive,
	workflow.StateApproved, workflow.StateProvisioning, workflow.StateUnderReview, workflow.StateRevoking,
	workflow.StateDraft, workflow.StateDraft, workflow.StateSubmitted, workflow.StateSubmitted,
	workflow.StateChangesRequested, workflow.StateRejected, workflow.StateWithdrawn, workflow.StateRevoked,
}

var (
	seedClusters  = []string{"shared-hp", "shared-hp", "shared-hp", "inference-hp", "research-hp"}
	seedInstances = []string{"ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge"}
	seedPurposes  = []string{
		"Fine-tune and serve the %s team's product-search ranking models on shared GPUs (request %d).",
		"Nightly evaluation of the %s team's recommendation models against 100%% of last week's traffic (request %d).",
		"Pre-train the %s team's domain language model; checkpoints go to the team's S3 bucket (request %d).",
		"Interactive notebooks for the %s team's data scientists exploring ranking features (request %d).",
	}
)

func seedTeams(n int) []string {
	teams := make([]string, n)
	for i := range teams {
		teams[i] = fmt.Sprintf("team-%02d", i)
	}
	return teams
}

type seeded struct {
	id    int64
	team  string
	state workflow.State
	hash  string
}

// seedConnections inserts n connections with version 1 each, in one
// transaction straight into the tables (the store's API would write an
// audit chain and take a transaction per row). Teams and states are drawn
// from rng; bodies are canonical ExampleContract variations, so capacity
// checks decode real contracts.
func seedConnections(tb testing.TB, db *store.DB, rng *rand.Rand, n int, teams []string, states []workflow.State, start time.Time) []seeded {
	tb.Helper()
	ctx := tb.Context()
	requester := map[string]int64{}
	for _, team := range teams {
		u, err := db.RecordLogin(ctx, "https://idp.example.test", "requester-"+team, "owner@"+team+".example.test", "", nil, start)
		if err != nil {
			tb.Fatal(err)
		}
		requester[team] = u.ID
	}
	tx, err := db.RawSQL().BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	insConn, err := tx.PrepareContext(ctx, `
INSERT INTO connections (team, state, cluster_name, purpose, current_version, approved_version, requester_id, created_at, updated_at, submitted_at)
VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	insVer, err := tx.PrepareContext(ctx, `
INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
VALUES (?, 1, ?, ?, ?, ?, ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]seeded, 0, n)
	for i := range n {
		team := teams[rng.IntN(len(teams))]
		state := states[rng.IntN(len(states))]
		c := workflow.ExampleContract()
		c.Team = team
		c.BusinessPurpose = fmt.Sprintf(seedPurposes[rng.IntN(len(seedPurposes))], team, i)
		c.ClusterName = seedClusters[rng.IntN(len(seedClusters))]
		c.Namespaces = []string{fmt.Sprintf("hyperpod-ns-%s-%d", team, i)}
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: seedInstances[rng.IntN(len(seedInstances))], Count: 1 + rng.IntN(4)}}
		c = c.Normalize()
		at := start.Add(time.Duration(i) * time.Minute)
		var approved, submitted any
		if state.Committed() || state == workflow.StateRevoked {
			approved = 1
		}
		if state != workflow.StateDraft {
			submitted = at.Add(time.Minute).Format(time.RFC3339Nano)
		}
		res, err := insConn.ExecContext(ctx, team, state, c.ClusterName, c.BusinessPurpose, approved, requester[team],
			at.Format(time.RFC3339Nano), at.Add(time.Hour).Format(time.RFC3339Nano), submitted)
		if err != nil {
			tb.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			tb.Fatal(err)
		}
		hash := c.Hash()
		if _, err := insVer.ExecContext(ctx, id, string(c.Canonical()), hash, strings.Join(c.Namespaces, " "), requester[team], at.Format(time.RFC3339Nano)); err != nil {
			tb.Fatal(err)
		}
		for _, g := range c.Scheduling.Guaranteed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO version_capacity (connection_id, version, instance_type, count) VALUES (?, 1, ?, ?)`, id, g.InstanceType, g.Count); err != nil {
				tb.Fatal(err)
			}
		}
		out = append(out, seeded{id, team, state, hash})
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return out
}

var benchStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func BenchmarkListConnections10k(b *testing.B) {
	db := openTB(b)
	teams := seedTeams(20)
	rows := seedConnections(b, db, rand.New(rand.NewPCG(1, 2)), 10_000, teams, seedStates, benchStart)
	const limit = 50
	cases := []struct {
		name   string
		filter store.ListFilter
		before int64
	}{
		{"first page", store.ListFilter{}, 0},
		{"deep page", store.ListFilter{}, rows[100].id},
		{"team+state", store.ListFilter{Team: "team-07", State: workflow.StateActive}, 0},
		{"team+state deep", store.ListFilter{Team: "team-07", State: workflow.StateActive}, rows[len(rows)/2].id},
		{"scope of 3 teams", store.ListFilter{Teams: teams[3:6]}, 0},
		{"query", store.ListFilter{Query: "language model"}, 0},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			page, _, err := db.ListConnections(ctx, bc.filter, bc.before, limit)
			if err != nil || len(page) == 0 {
				b.Fatalf("ListConnections = %d rows, %v", len(page), err)
			}
			for b.Loop() {
				if _, _, err := db.ListConnections(ctx, bc.filter, bc.before, limit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApprove approves one submitted request per iteration on a
// database that already holds 10,000 connections, with and without the
// capacity check (which decodes every committed contract on the cluster).
func BenchmarkApprove(b *testing.B) {
	db := openTB(b)
	teams := seedTeams(20)
	rng := rand.New(rand.NewPCG(3, 4))
	seedConnections(b, db, rng, 10_000, teams, seedStates, benchStart)
	u, err := db.RecordLogin(b.Context(), "https://idp.example.test", "admin", "admin@example.test", "", nil, benchStart)
	if err != nil {
		b.Fatal(err)
	}
	admin := workflow.Actor{ID: u.ID, Email: u.Email}
	// workflow.Approve runs every rule (capacity, claims, independence)
	// inside the transaction, on facts read there.
	for _, bc := range []struct{ name string }{{"every rule"}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			todo := seedConnections(b, db, rng, b.N, teams, []workflow.State{workflow.StateSubmitted}, benchStart.Add(time.Hour*24*365))
			now := benchStart.Add(2 * 365 * 24 * time.Hour)
			// Not b.Loop: the requests to approve are seeded for b.N up front.
			b.ResetTimer()
			for i := range b.N {
				c := todo[i]
				got, _, err := db.Approve(ctx, c.id, admin, store.Expect{Version: 1, Hash: c.hash, PlanHash: "plan"}, "ok", workflow.ClusterFacts{}, now)
				if err != nil || got.State != workflow.StateApproved {
					b.Fatalf("Approve(%d) = %s, %v", c.id, got.State, err)
				}
			}
		})
	}
}

// TestListConnectionsUsesIndexes explains the query shapes ListConnections,
// Queue and the capacity check build, and fails when one of them reads
// connections without an index. An unfiltered list or a purpose search may
// walk the table in id order (SCAN c without a sort): LIMIT stops it after
// one page of matches.
//
// The statements mirror versions.go and decisions.go; keep them in step.
func TestListConnectionsUsesIndexes(t *testing.T) {
	db := openTB(t)
	base := `SELECT ` + store.ConnCols + ` FROM connections c JOIN users u ON u.id = c.requester_id`
	type cond struct {
		sql  string
		args []any
	}
	list := func(conds ...cond) (string, []any) {
		q, args := base, []any{}
		var where []string
		for _, c := range conds {
			where, args = append(where, c.sql), append(args, c.args...)
		}
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		return q + " ORDER BY c.id DESC LIMIT ?", append(args, 51)
	}
	var (
		scope1 = cond{"c.team IN (?)", []any{"red"}}
		scope3 = cond{"c.team IN (?,?,?)", []any{"red", "blue", "green"}}
		team   = cond{"c.team = ?", []any{"red"}}
		state  = cond{"c.state = ?", []any{"submitted"}}
		clus   = cond{"c.cluster_name = ?", []any{"shared-hp"}}
		query  = cond{`c.purpose LIKE ? ESCAPE '\'`, []any{"%ranking%"}}
		before = cond{"c.id < ?", []any{5000}}
	)
	type shape struct {
		name      string
		sql       string
		args      []any
		allowScan bool // an id-order walk that LIMIT stops
		allowSort bool // a temp b-tree over the matching rows
	}
	listShape := func(name string, allowScan, allowSort bool, conds ...cond) shape {
		q, args := list(conds...)
		return shape{name, q, args, allowScan, allowSort}
	}
	tests := []shape{
		listShape("first page", true, false),
		listShape("deep page", false, false, before),
		listShape("scope of one team", false, false, scope1),
		listShape("scope of one team, deep", false, false, scope1, before),
		// Several IN values are several index ranges, which SQLite merges
		// with a sort of every row of those teams; see the report.
		listShape("scope of three teams", false, true, scope3),
		listShape("scope of three teams, deep", false, true, scope3, before),
		listShape("team", false, false, team),
		listShape("team, deep", false, false, team, before),
		listShape("state", false, false, state),
		listShape("team and state", false, false, team, state),
		listShape("team and state, deep", false, false, team, state, before),
		listShape("scope and state", false, false, scope3, state),
		listShape("cluster", false, false, clus),
		listShape("cluster and state, deep", false, false, clus, state, before),
		listShape("query", true, false, query),
		listShape("query in a team", false, false, team, query, before),
		{name: "queue", sql: base + ` WHERE (c.state = 'submitted' OR c.amendment = 'submitted') ORDER BY c.submitted_at, c.id LIMIT ?`, args: []any{50}},
		{name: "committed capacity", sql: `SELECT cv.body FROM connections c JOIN contract_versions cv ON cv.connection_id = c.id AND cv.version = c.approved_version
WHERE c.cluster_name = ? AND c.id != ? AND c.state IN (?,?,?,?,?)`,
			args: []any{"shared-hp", 7, "approved", "provisioning", "active", "under_review", "revoking"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := explain(t, db, tt.sql, tt.args...)
			var sawC bool
			for _, line := range plan {
				switch {
				case strings.HasPrefix(line, "SCAN c") && !strings.Contains(line, "INDEX"):
					sawC = true
					if !tt.allowScan {
						t.Errorf("full scan of connections:\n%s", strings.Join(plan, "\n"))
					}
				case strings.HasPrefix(line, "SEARCH c USING"):
					sawC = true
				case strings.HasPrefix(line, "SCAN c USING INDEX connections_waiting"):
					// A partial index holding only what waits for an
					// admin, in queue order: the walk reads matches only.
					sawC = true
				case strings.Contains(line, "TEMP B-TREE") && !tt.allowSort:
					t.Errorf("sorts the matching rows instead of reading them in index order:\n%s", strings.Join(plan, "\n"))
				case strings.HasPrefix(line, "SCAN u") || strings.HasPrefix(line, "SCAN cv"):
					t.Errorf("full scan of a joined table:\n%s", strings.Join(plan, "\n"))
				}
			}
			if !sawC {
				t.Errorf("plan does not mention connections c:\n%s", strings.Join(plan, "\n"))
			}
		})
	}
}

func explain(t *testing.T, db *store.DB, query string, args ...any) []string {
	t.Helper()
	if onPostgres() {
		t.Skip("the plan tests check SQLite's planner (EXPLAIN QUERY PLAN); PostgreSQL's chooses by table statistics, so they run in the SQLite pass only")
	}
	rows, err := db.RawSQL().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkDataVersionParallel reads the data version from 64 goroutines
// at once, as every request of a loaded portal does first (wrk -c64 in
// bench/pages): on SQLite the WAL-index header is read under a shared
// lock, so readers never wait for one another.
func BenchmarkDataVersionParallel(b *testing.B) {
	db := openTB(b)
	ctx := b.Context()
	if _, ok, err := db.DataVersion(ctx); err != nil || !ok {
		b.Fatalf("DataVersion = %v, %v", ok, err)
	}
	b.SetParallelism(32) // × GOMAXPROCS (2 here): 64 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := db.DataVersion(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
