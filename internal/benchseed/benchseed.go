// Package benchseed fills a migrated portal database (SQLite or PostgreSQL)
// like a large installation, for the page benchmark of `make bench`
// (bench/pages) and its test: by default 10,000 connections across 1,000
// teams on one cluster, each with a real contract version and its
// capacity, 1,000,000 audit events, open reviews in the review queue, 30
// days of hourly usage for every team and the cluster, and a cluster
// inventory with room for every approved connection.
//
// Everything is generated in SQL with the one row generator each engine has
// (a recursive CTE on SQLite, generate_series on PostgreSQL), so seeding
// takes seconds; the two large tables (audit_events, usage_hours) are
// loaded with their secondary indexes dropped and built again in the same
// transaction. It writes straight into the tables, not through the
// workflow: it is test data, never something a portal would write, and
// the portal binary never imports it (cmd/portal TestImportBoundaries).
//
// The audit trail: audit_events is append-only (triggers refuse updates and
// deletes) and hash-chained. Computing a real SHA-256 chain over 1,000,000
// rows would be done row by row, so the seeded events carry stand-in hashes
// that link (each prev_hash is the previous event's hash; the first one's
// is the genesis hash) but do not match their content, and the shared
// verification checkpoint (audit_checkpoint 'audit-page') is set at the
// newest seeded event, as the background check of a long-running
// installation leaves it. The audit page and `portal serve`'s background
// check then verify only what is appended after the seed (last month's
// statements the portal closes at start, signals, decisions: they chain
// onto the last seeded hash and verify), exactly as
// on a real installation whose check has caught up; `portal audit verify`,
// which walks the whole chain, reports the seeded rows as altered.
package benchseed

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Scale says how much to seed.
type Scale struct {
	Connections int // connections, ids 1..Connections
	Teams       int // teams team-0 .. team-(Teams-1), connections spread evenly
	AuditEvents int // audit events before the portal adds any
	UsageDays   int // days of hourly usage per team, ending at the hour before Now
	// Now is the seed's "today": usage ends at its hour, review due dates
	// lie around it. The portal's pages show the last 30 days up to the
	// real now, so use time.Now().
	Now time.Time
	// Logf, when set, is told how long each statement took.
	Logf func(format string, args ...any)
}

// Large is the scale of issue 15: 10,000 connections, 1,000 teams,
// 1,000,000 audit events, 30 days of usage (the usage page's default
// period).
func Large(now time.Time) Scale {
	return Scale{Connections: 10000, Teams: 1000, AuditEvents: 1000000, UsageDays: 30, Now: now}
}

// Cluster is the one cluster every seeded connection is on.
const Cluster = "shared-hp"

// InstanceType is the instance type of every seeded connection's capacity.
const InstanceType = "ml.p5.48xlarge"

// Seeded says where the seeded data shows: the pages the benchmark
// measures, and what each must contain.
type Seeded struct {
	DetailID    int64  // an active connection with an approved version
	UsageTeam   string // a team with an active connection and usage
	OpenReviews int
}

// Page is one page of the benchmark: its path, the demo user who views
// it (devidp.DemoUsers), and a string its body must contain (Want) and one
// it must not (Not, when set) when it shows the seeded data.
type Page struct {
	Name, Path, User, Want, Not string
}

// Pages are the six pages of issue 15: as the demo admin, but the review
// queue, which only reviewers may open (workflow.ActionViewReviewHome), as
// the demo reviewer.
func (s Seeded) Pages() []Page {
	return []Page{
		{"dashboard", "/", "admin", `data-testid="card-admin"`, ""},
		{"list", "/connections", "admin", "Seeded connection", ""},
		{"detail", fmt.Sprintf("/connections/%d", s.DetailID), "admin", fmt.Sprintf("<h1>Connection #%d · team %s</h1>", s.DetailID, s.UsageTeam), ""},
		{"audit", "/audit", "admin", `data-testid="chain-ok"`, "BROKEN"},
		{"usage", "/teams/" + s.UsageTeam + "/usage", "admin", "accelerators (the approved connection", `data-testid="usage-empty"`},
		{"reviews", "/reviews", "reviewer", fmt.Sprintf("%d open", s.OpenReviews), `data-testid="review-home"`},
	}
}

// Seed fills the database dsn names (a SQLite file or a postgres:// URL,
// as `portal serve --db` takes it), migrated and holding no connection,
// audit event, review or usage yet.
func Seed(ctx context.Context, dsn string, s Scale) (Seeded, error) {
	postgres := strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
	if s.Connections < 40 || s.Teams < 1 || s.Teams*4 > s.Connections || s.AuditEvents < 1 || s.UsageDays < 1 {
		return Seeded{}, fmt.Errorf("benchseed: scale %+v: want at least 40 connections, 1 to connections/4 teams, 1 audit event and 1 day of usage", s)
	}
	now := s.Now.UTC()
	contract := workflow.ExampleContract()
	body := strings.ReplaceAll(string(contract.Canonical()), "'", "''")
	hash := contract.Hash()
	rows := func(n int) (with, from string) {
		if postgres {
			return "", fmt.Sprintf("generate_series(1, %d) AS n(i)", n)
		}
		return fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)", n), "n"
	}
	pad := func(expr string) string { // a 64-digit zero-padded number: a stand-in hash
		if postgres {
			return "lpad((" + expr + ")::text, 64, '0')"
		}
		return "printf('%064d', " + expr + ")"
	}
	// day is today plus expr days, as YYYY-MM-DD; hour is the seed's last
	// hour minus expr hours, in the stores' time layout.
	today := now.Format(time.DateOnly)
	lastHour := now.Truncate(time.Hour).Add(-time.Hour)
	day := func(expr string) string {
		if postgres {
			return fmt.Sprintf("to_char(DATE '%s' + (%s)::integer, 'YYYY-MM-DD')", today, expr)
		}
		return fmt.Sprintf("date('%s', (%s) || ' days')", today, expr)
	}
	hour := func(expr string) string {
		if postgres {
			return fmt.Sprintf(`to_char(TIMESTAMP '%s' - (%s) * INTERVAL '1 hour', 'YYYY-MM-DD"T"HH24:MI:SS".000000000Z"')`, lastHour.Format("2006-01-02 15:04:05"), expr)
		}
		return fmt.Sprintf(`strftime('%%Y-%%m-%%dT%%H:%%M:%%S.000000000Z', '%s', '-' || (%s) || ' hours')`, lastHour.Format("2006-01-02 15:04:05"), expr)
	}
	ts := func(t time.Time) string { return "'" + t.UTC().Format("2006-01-02T15:04:05.000000000Z") + "'" }
	created := ts(now.AddDate(0, -6, 0))
	// The example contract's evidence frozen in a review; the queue flags a
	// review whose evidence no longer matches its hash.
	evidence := `{"seed":"benchseed","contract_hash":"` + hash + `"}`
	evidenceHash := store.EvidenceHash([]byte(evidence))

	cw, cf := rows(s.Connections)
	aw, af := rows(s.AuditEvents)
	hours := s.UsageDays * 24
	uw, uf := rows(s.Teams * hours)
	hw, hf := rows(hours)
	T := s.Teams
	// Connection i is in team-((i / 4) % Teams), so that each team has
	// connections in several states; by i % 4 a draft, submitted, approved
	// or active; every tenth active one (i % 40 = 3) is under
	// review with an open review, due between 30 days ago and 9 days ahead.
	stmts := []string{
		`INSERT INTO users (issuer, subject, email, name, groups_json, first_login_at, last_login_at)
		 VALUES ('benchseed', 'seed', 'seed@example.test', 'Seed', '[]', ` + created + `, ` + created + `)`,
		`INSERT INTO connections (id, team, state, cluster_name, purpose, current_version, requester_id, created_at, updated_at, submitted_at)
		 ` + cw + `
		 SELECT i, 'team-' || ((i / 4) % ` + fmt.Sprint(T) + `),
		        CASE WHEN i % 40 = 3 THEN 'under_review' WHEN i % 4 = 0 THEN 'draft' WHEN i % 4 = 1 THEN 'submitted' WHEN i % 4 = 2 THEN 'approved' ELSE 'active' END,
		        '` + Cluster + `', 'Seeded connection ' || i || ' of a large installation', 1, (SELECT id FROM users WHERE subject = 'seed' AND issuer = 'benchseed'),
		        ` + created + `, ` + created + `, ` + created + ` FROM ` + cf,
		`INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
		 SELECT id, 1, '` + body + `', '` + hash + `', 'ns-' || id, requester_id, created_at FROM connections`,
		`INSERT INTO version_capacity (connection_id, version, instance_type, count)
		 SELECT id, 1, '` + InstanceType + `', 2 FROM connections`,
		`UPDATE connections SET approved_version = 1, review_due = ` + day("id % 180") + ` WHERE state IN ('approved', 'active', 'under_review')`,
		// Room for every approved connection (2 instances each), observed
		// and set by hand, as after "Refresh from cluster".
		fmt.Sprintf(`INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at) VALUES ('%s', '%s', %d, 'benchseed', %s)`,
			Cluster, InstanceType, s.Connections, created),
		fmt.Sprintf(`INSERT INTO cluster_inventory (cluster_name, instance_type, count, updated_at) VALUES ('%s', '%s', %d, %s)`,
			Cluster, InstanceType, s.Connections, created),
		`INSERT INTO reviews (connection_id, team, version, trigger, detail, due_on, opened_at, evidence, evidence_hash)
		 SELECT id, team, 1, 'scheduled', 'The scheduled review of the contract is due', ` + day("(id % 40) - 30") + `, ` + created + `,
		        '` + evidence + `', '` + evidenceHash + `' FROM connections WHERE state = 'under_review'`,
		// Hourly usage of every team's namespace: 8 of its 16 accelerators
		// guaranteed, some borrowed, varying by hour.
		bulk("usage_hours") + `INSERT INTO usage_hours (team, namespace, instance_type, hour, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s,
		                          running, pending, preempted, wait_p50_s, wait_p90_s, wait_p99_s, source)
		 ` + uw + `
		 SELECT 'team-' || ((i - 1) / ` + fmt.Sprint(hours) + `), 'ns-team-' || ((i - 1) / ` + fmt.Sprint(hours) + `), '` + InstanceType + `',
		        ` + hour(fmt.Sprint(hours-1)+" - (i - 1) % "+fmt.Sprint(hours)) + `,
		        8 * 3600, (i % 5) * 3600, 64000 * 3600, 262144 * 3600,
		        3 + i % 4, i % 3, 0, 30, 120, 600, 'cluster' FROM ` + uf,
		`INSERT INTO usage_cluster_hours (cluster, instance_type, hour, capacity_accel_s, allocated_accel_s, unhealthy_node_s, source)
		 ` + hw + `
		 SELECT '` + Cluster + `', '` + InstanceType + `', ` + hour("i - 1") + `, ` + fmt.Sprint(s.Connections*8) + ` * 3600,
		        ` + fmt.Sprint(T*10) + ` * 3600, 0, 'cluster' FROM ` + hf,
		// The trail: one event per connection change, spread over the
		// connections, oldest first.
		bulk("audit_events") + `INSERT INTO audit_events (at, actor_id, actor, action, object_type, object_id, team, version, reason, prev_hash, hash)
		 ` + aw + `
		 SELECT ` + created + `, NULL, 'seed@example.test', 'connection.seed', 'connection', ((i - 1) % ` + fmt.Sprint(s.Connections) + `) + 1,
		        'team-' || (((((i - 1) % ` + fmt.Sprint(s.Connections) + `) + 1) / 4) % ` + fmt.Sprint(T) + `), 1, 'seeded by benchseed', ` + pad("i - 1") + `, ` + pad("i") + ` FROM ` + af,
		// Verified up to the newest seeded event (see the package doc).
		`INSERT INTO audit_checkpoint (name, event_id, hash, event_count, verified_at)
		 SELECT 'audit-page', id, hash, ` + fmt.Sprint(s.AuditEvents) + `, ` + created + ` FROM audit_events ORDER BY id DESC LIMIT 1`,
	}
	// The capacity totals and team guarantees the store keeps in the
	// transaction of every change (internal/store/capacity.go): the rows
	// above were inserted around it.
	stmts = append(stmts, store.RebuildCapacityTotalsSQL...)
	if postgres {
		// Keep the sequences ahead of the ids given here, and give the
		// planner the statistics a real installation's tables have.
		stmts = append(stmts,
			`SELECT setval(pg_get_serial_sequence('connections', 'id'), (SELECT max(id) FROM connections))`,
			`ANALYZE`)
	}
	db, err := open(dsn, postgres)
	if err != nil {
		return Seeded{}, err
	}
	defer db.Close()
	for _, st := range stmts {
		t0 := time.Now()
		if table, rest, ok := strings.Cut(st, bulkMark); ok {
			err = bulkInsert(ctx, db, postgres, strings.TrimPrefix(table, "--"), rest)
		} else {
			_, err = db.ExecContext(ctx, st)
		}
		if err != nil {
			return Seeded{}, fmt.Errorf("benchseed: %w\n%s", err, st)
		}
		if s.Logf != nil {
			line := strings.Join(strings.Fields(st), " ")
			s.Logf("benchseed: %s: %s", time.Since(t0).Round(time.Millisecond), line[:min(len(line), 80)])
		}
	}
	// An active connection (i % 4 = 3, not i % 40 = 3) about the middle:
	// 5007 at the large scale.
	detail := int64(s.Connections/2 + 3)
	for detail%4 != 3 || detail%40 == 3 {
		detail++
	}
	if detail > int64(s.Connections) {
		detail = 7
	}
	return Seeded{DetailID: detail, UsageTeam: fmt.Sprintf("team-%d", (detail/4)%int64(T)), OpenReviews: (s.Connections + 37) / 40}, nil
}

// bulkMark separates a table's name from a bulk insert into it (bulk).
const bulkMark = "--bulk\n"

// bulk marks the statement after it as a bulk insert into table.
func bulk(table string) string { return "--" + table + bulkMark }

// open connects to the database on one connection, so that a SQLite
// pragma set on it holds for every statement: a bulk load touches more
// pages than SQLite's default cache (2 MiB) holds.
func open(dsn string, postgres bool) (*sql.DB, error) {
	var db *sql.DB
	var err error
	if postgres {
		db, err = sql.Open("pgx", dsn)
	} else {
		db, err = sql.Open("sqlite", "file:"+dsn+"?_pragma=busy_timeout(5000)&_pragma=cache_size(-262144)&_pragma=synchronous(OFF)")
	}
	if err != nil {
		return nil, fmt.Errorf("benchseed: open: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// bulkInsert runs insert into table in one transaction that drops the
// table's secondary indexes first and creates them again after, as the
// schema defines them (read from the database, so an index a later
// migration adds is kept too): building an index once over a million rows
// is much faster than keeping it up to date row by row. Unique indexes
// (constraints) stay.
func bulkInsert(ctx context.Context, db *sql.DB, postgres bool, table, insert string) error {
	q := `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL AND sql NOT LIKE 'CREATE UNIQUE%'`
	if postgres {
		q = `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 AND indexdef NOT LIKE 'CREATE UNIQUE%'`
	}
	rows, err := db.QueryContext(ctx, q, table)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	var indexes []index
	for rows.Next() {
		var i index
		if err := rows.Scan(&i.name, &i.def); err != nil {
			rows.Close()
			return err
		}
		indexes = append(indexes, i)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, i := range indexes {
		if _, err := tx.ExecContext(ctx, `DROP INDEX "`+i.name+`"`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, insert); err != nil {
		return err
	}
	for _, i := range indexes {
		if _, err := tx.ExecContext(ctx, i.def); err != nil {
			return err
		}
	}
	return tx.Commit()
}
