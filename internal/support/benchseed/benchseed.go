// Package benchseed fills a migrated portal database (SQLite or PostgreSQL)
// like a large installation, for the page benchmark of `make bench`
// (bench/pages), internal/web's BenchmarkPagesAtScale and their test: by
// default 10,000 connections across 1,000 teams on one cluster, each with a
// real contract version and its capacity, open reviews in the review queue,
// 1,000,000 audit events, 30 days of hourly usage for every team and the
// cluster, and a cluster inventory with room for every approved connection.
// The portal binary never imports it (cmd/portal TestImportBoundaries).
//
// What is written through the portal's code. Everything that is a
// connection's state goes through the portal's commands, so that the
// seeded rows are what the portal itself writes (style.md rule 6: apply,
// internal/store/apply.go, is the one writer of connections): the
// connections, their contract versions and capacity, submissions,
// decisions, provisioning jobs, reviews, the capacity totals apply keeps
// (migration 00021), the audit events and notices the commands record.
// Each connection is created (workflow.Create) and, by its number i, left a
// draft (i % 4 = 0), submitted (workflow.Submit; i % 4 = 1) or approved
// by an admin other than its requester (workflow.Approve); the approval's
// provisioning job is then run through the store's job methods as the
// worker runs it: as a dry run, which leaves the connection approved
// (i % 4 = 2), or for real, which makes it active (i % 4 = 3); every tenth
// active one (i % 40 = 3) then has a scheduled review opened
// (workflow.OpenReview). Creating, submitting, approving and opening
// reviews run in store batches (store.DB.InBatch: many commands in one
// transaction, each effect recorded by apply), 500 connections a
// transaction: a transaction per command would make seeding several
// times slower. A batch does not read an approval's facts as the store's
// Approve does (its claims lookup reads every live contract, which would
// make seeding quadratic): Seed reads the inventory and the capacity held
// from the store, counts the capacity each approval adds, and gives every
// connection a namespace and roles of its own, so nothing is claimed twice
// (TestSeededPagesServe checks both facts against the store afterwards).
// The notices the commands queued are then delivered in the app
// (internal/notify), as a running portal would have.
//
// What is bulk history. The two large tables that record no connection's
// state are generated in SQL with the one row generator each engine has (a
// recursive CTE on SQLite, generate_series on PostgreSQL), loaded with
// their secondary indexes dropped and built again in the same transaction:
// usage_hours (and usage_cluster_hours), which the usage collector writes,
// and the audit events beyond those the commands appended. Going through
// code for those would be far too slow (a million appends, each hashing
// the chain) and would exercise nothing the benchmark measures.
//
// The audit trail: audit_events is append-only (triggers refuse updates
// and deletes) and hash-chained. The events the commands appended (30,252
// at the large scale, about 3 a connection) are real and chain onto
// what the trail held (the genesis hash, on an empty one); they count toward Scale.AuditEvents, and the
// trail is brought up to it with stand-in events whose hashes link (the
// first one's prev_hash is the last real event's hash, each next one's the
// previous stand-in's) but do not match their content. The commands'
// events alone may exceed a small Scale.AuditEvents: the trail then holds
// just them (Seeded.AuditEvents says how many). The shared verification
// checkpoint (audit_checkpoint 'audit-page') is set at the newest event,
// as the background check of a long-running installation leaves it. The
// audit page and `portal serve`'s background check then verify only what
// is appended after the seed (last month's statements the portal closes at
// start, signals, decisions: they chain onto the last seeded hash and
// verify), exactly as on a real installation whose check has caught up;
// `portal audit verify`, which walks the whole chain, reports the
// stand-in rows as altered.
package benchseed

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Scale says how much to seed.
type Scale struct {
	Connections int // connections, ids 1..Connections
	Teams       int // teams team-0 .. team-(Teams-1), connections spread evenly
	// AuditEvents is the audit trail's length before the portal adds
	// to it: the commands' own events, then stand-ins up to this many.
	AuditEvents int
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
	// AuditEvents is how many events the trail holds: Scale.AuditEvents,
	// or more when the commands that made the connections appended more
	// (see the package doc).
	AuditEvents int
}

// Page is one page of the benchmark: its path, the demo user who views
// it (devidp.DemoUsers), and a string its body must contain (Want) and one
// it must not (Not, when set) when it shows the seeded data.
type Page struct {
	Name, Path, User, Want, Not string
	// Token: the page is read through the API with a read token of User
	// (Session.Token), not with the session cookie.
	Token bool
}

// Reader names the session a page is read with: its user's, or the
// user's token's.
func (p Page) Reader() string {
	if p.Token {
		return p.User + " token"
	}
	return p.User
}

// Pages are the pages of ../shared/docs/performance.md's pages row: the
// six of issue 15 as the demo admin, but the review queue, which only
// reviewers may open (workflow.ActionViewReviewHome), as the demo reviewer;
// and the finance page, the month to date's chargeback of every team,
// which only the finance role may open (workflow.ActionViewFinanceHome), as
// the demo finance user. The finance page shows the usage team's row: a
// team with a guarantee in force is charged its idle share even in the
// first hour of a month, before any of the month's usage is recorded.
func (s Seeded) Pages() []Page {
	return []Page{
		{"dashboard", "/", "admin", `data-testid="card-admin"`, "", false},
		{"list", "/connections", "admin", "Seeded connection", "", false},
		{"detail", fmt.Sprintf("/connections/%d", s.DetailID), "admin", fmt.Sprintf("<h1>Connection #%d · team %s</h1>", s.DetailID, s.UsageTeam), "", false},
		{"audit", "/audit", "admin", `data-testid="chain-ok"`, "BROKEN", false},
		{"usage", "/teams/" + s.UsageTeam + "/usage", "admin", "accelerators (the approved connection", `data-testid="usage-empty"`, false},
		{"reviews", "/reviews", "reviewer", fmt.Sprintf("%d open", s.OpenReviews), `data-testid="review-home"`, false},
		// The finance page's first window of teams (50, by name: team-0,
		// team-1, team-10, ...), each with usage.
		{"finance", "/finance", "finance", `data-testid="finance-team-team-0"`, `data-testid="finance-empty"`, false},
		// The API's row: the connections' first page, as JSON, with the
		// admin's read token (every team's connections).
		{"api-list", "/api/v1/connections", "admin", `"next":"/api/v1/connections?before=`, `"items":[]`, true},
	}
}

// Seed fills the database dsn names (a SQLite file or a postgres:// URL,
// as `portal serve --db` takes it), migrated and holding no connection,
// review or usage yet (it may hold users and audit events: the seeded
// history chains onto them).
func Seed(ctx context.Context, dsn string, s Scale) (Seeded, error) {
	postgres := strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
	if s.Connections < 40 || s.Teams < 1 || s.Teams*4 > s.Connections || s.AuditEvents < 1 || s.UsageDays < 1 {
		return Seeded{}, fmt.Errorf("benchseed: scale %+v: want at least 40 connections, 1 to connections/4 teams, 1 audit event and 1 day of usage", s)
	}
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		return Seeded{}, fmt.Errorf("benchseed: %w", err)
	}
	defer db.Close()
	t0 := time.Now()
	conns, err := seedConnections(ctx, db, s, logf)
	if err != nil {
		return Seeded{}, fmt.Errorf("benchseed: %w", err)
	}
	head, err := db.AuditHead(ctx)
	if err != nil {
		return Seeded{}, fmt.Errorf("benchseed: %w", err)
	}
	logf("benchseed: %s: %d connections through the workflow's commands, %d audit events", time.Since(t0).Round(time.Millisecond), s.Connections, head.Count)
	if err := seedHistory(ctx, dsn, postgres, s, conns, head); err != nil {
		return Seeded{}, err
	}
	// Verified up to the newest seeded event (see the package doc).
	if head, err = db.AuditHead(ctx); err != nil {
		return Seeded{}, fmt.Errorf("benchseed: %w", err)
	}
	if err := db.AdvanceAuditCheckpoint(ctx, store.AuditCheckpoint{ID: head.ID, Hash: head.Hash, Count: head.Count}, s.Now.UTC().Add(-time.Minute)); err != nil {
		return Seeded{}, fmt.Errorf("benchseed: %w", err)
	}
	// An active connection (i % 4 = 3, not i % 40 = 3) about the middle:
	// 5007 at the large scale.
	detail := s.Connections/2 + 3
	for detail%4 != 3 || detail%40 == 3 {
		detail++
	}
	if detail > s.Connections {
		detail = 7
	}
	return Seeded{DetailID: conns.ids[detail-1], UsageTeam: teamOf(detail, s.Teams), OpenReviews: conns.underReview,
		AuditEvents: head.Count}, nil
}

// teamOf is the team of the i-th seeded connection (1-based): each team
// has connections in several states.
func teamOf(i, teams int) string { return fmt.Sprintf("team-%d", (i/4)%teams) }

// target is the state the i-th seeded connection (1-based) is brought to:
// by i % 4 a draft, submitted, approved or active; every tenth active
// one (i % 40 = 3) is under review.
func target(i int) workflow.State {
	switch {
	case i%40 == 3:
		return workflow.StateUnderReview
	case i%4 == 0:
		return workflow.StateDraft
	case i%4 == 1:
		return workflow.StateSubmitted
	case i%4 == 2:
		return workflow.StateApproved
	}
	return workflow.StateActive
}

// contractOf is the i-th seeded connection's contract: the example
// contract for its team, with a namespace and roles of its own (an
// approval refuses a namespace or role another connection claims).
func contractOf(i, teams int) workflow.Contract {
	team := teamOf(i, teams)
	c := workflow.ExampleContractFor(team)
	c.BusinessPurpose = fmt.Sprintf("Seeded connection %d of a large installation: fine-tune and serve %s's models on shared GPUs.", i, team)
	c.Namespaces = []string{fmt.Sprintf("ns-%d", i)}
	for _, r := range []*string{&c.ProjectRoleARN, &c.AccessRoleARN, &c.WorkloadRoleARN} {
		*r = strings.Replace(*r, ":role/"+team+"-", fmt.Sprintf(":role/%s-%d-", team, i), 1)
	}
	return c
}

// seeded is what seedConnections made: the connections' ids in order
// (the i-th seeded connection is ids[i-1]) and how many are under review.
type seeded struct {
	ids         []int64
	underReview int
}

// batchSize is how many connections' commands one transaction records.
const batchSize = 500

// seedConnections creates the connections and brings each to its target
// state through the portal's commands (see the package doc): the store's
// batches (store.Batch: the workflow's commands, each effect recorded by
// the store's one apply) for creating, submitting, approving and opening
// reviews, and the store's job methods, as the provisioning worker calls
// them, for each approval's provisioning job.
func seedConnections(ctx context.Context, db *store.DB, s Scale, logf func(string, ...any)) (seeded, error) {
	t0 := time.Now()
	now := s.Now.UTC()
	start := now.AddDate(0, 0, -90)
	var out seeded
	login := func(subject, name string) (workflow.Actor, error) {
		u, err := db.RecordLogin(ctx, "benchseed", subject, subject+"@example.test", name, nil, start)
		return workflow.Actor{ID: u.ID, Email: u.Email}, err
	}
	owner, err := login("seed", "Seed")
	if err != nil {
		return out, err
	}
	admin, err := login("seed-admin", "Seed admin") // an approver independent of the requester
	if err != nil {
		return out, err
	}
	// The notices the commands queue, delivered in the app as `portal
	// serve --dev`'s notifier delivers them (to the users of the dev
	// identity provider's mapping), every few hundred commands as a
	// running notifier would: a long-running installation has delivered
	// them, and a benchmark started on the seeded database must not
	// measure the portal delivering thousands of them.
	var clock time.Time
	w := &notify.Worker{DB: db, Resolve: auth.DevMapping().Resolve, Now: func() time.Time { return clock }}
	deliver := func(at time.Time) error {
		clock = at
		if err := w.RunOnce(ctx); err != nil {
			return fmt.Errorf("deliver the notices: %w", err)
		}
		return nil
	}
	// Room for every approved connection (2 instances each), observed and
	// set by hand, as after "Refresh from cluster".
	room := s.Connections
	if err := db.ReplaceObserved(ctx, Cluster, []store.ObservedRow{{InstanceType: InstanceType, Capacity: room, Basis: "benchseed", ObservedAt: start}}, admin, start); err != nil {
		return out, err
	}
	if err := db.SetInventory(ctx, Cluster, InstanceType, room, admin, start); err != nil {
		return out, err
	}
	// The facts an approval's rule reads, read here from the store and
	// kept up to date as the batch approves (store.Batch leaves them to
	// its caller): the inventory, the capacity live connections hold, and
	// the claims, none, as every seeded contract has its own namespace and
	// roles (TestSeededFacts checks both against the store).
	inventory, err := db.Inventory(ctx, Cluster)
	if err != nil {
		return out, err
	}
	held, err := db.CommittedCapacity(ctx, Cluster, 0)
	if err != nil {
		return out, err
	}
	committed := 0
	for _, c := range held {
		if c.InstanceType == InstanceType {
			committed += c.Count
		}
	}
	// Each connection is created, submitted and approved within its own
	// three seconds, starting 90 days ago.
	out.ids = make([]int64, 0, s.Connections)
	for lo := 1; lo <= s.Connections; lo += batchSize {
		err := db.InBatch(ctx, func(b *store.Batch) error {
			for i := lo; i < lo+batchSize && i <= s.Connections; i++ {
				at := start.Add(time.Duration(3*i) * time.Second)
				c := contractOf(i, s.Teams)
				eff, err := workflow.Create(owner, c, at)
				if err != nil {
					return err
				}
				id, err := b.Create(eff, at)
				if err != nil {
					return err
				}
				out.ids = append(out.ids, id)
				to := target(i)
				if to == workflow.StateDraft {
					continue
				}
				if _, err := b.Command(id, false, at.Add(time.Second), func(cs workflow.Conn) (workflow.Effect, error) {
					return workflow.Submit(cs, owner, workflow.Pin{Version: cs.CurrentVersion, Hash: cs.CurrentHash}, at.Add(time.Second))
				}); err != nil {
					return err
				}
				if to == workflow.StateSubmitted {
					continue
				}
				if _, err := b.Command(id, true, at.Add(2*time.Second), func(cs workflow.Conn) (workflow.Effect, error) {
					f := workflow.ApprovalFacts{Contract: *eff.Version, Inventory: inventory,
						Committed: []workflow.Capacity{{InstanceType: InstanceType, Count: committed}}}
					in := workflow.ApprovalInput{Version: cs.CurrentVersion, Hash: cs.CurrentHash, PlanHash: "benchseed-" + cs.CurrentHash[:16], Reason: "Seeded approval"}
					return workflow.Approve(cs, admin, in, f, at.Add(2*time.Second))
				}); err != nil {
					return fmt.Errorf("approve connection %d: %w", id, err)
				}
				committed += 2
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		if err := deliver(start.Add(time.Duration(3*(lo+batchSize)) * time.Second)); err != nil {
			return out, err
		}
	}
	logf("benchseed: %s: %d connections created, submitted, approved", time.Since(t0).Round(time.Millisecond), s.Connections)
	if n := len(out.ids); out.ids[n-1]-out.ids[0] != int64(n-1) {
		return out, fmt.Errorf("the connections' ids are %d..%d, not %d in a row: was the database empty?", out.ids[0], out.ids[n-1], n)
	}
	// Each approval queued its provisioning job: the worker runs them,
	// spread over 88 days from 89 days ago, so that the active
	// connections' next reviews (due a cadence, 90 days, after their
	// activation) fall over the coming three months. An approved one's
	// job ran as a dry run, which leaves it approved (as `portal serve
	// --dev`'s worker does), an active one's for real.
	jobs := 0
	for i := 1; i <= s.Connections; i++ {
		if to := target(i); to != workflow.StateDraft && to != workflow.StateSubmitted {
			jobs++
		}
	}
	const worker = "benchseed"
	every := 88 * 24 * time.Hour / time.Duration(jobs)
	for k := range jobs {
		at := start.Add(24*time.Hour + time.Duration(k)*every)
		j, ok, err := db.ClaimJob(ctx, worker, at, time.Hour)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, fmt.Errorf("job %d of %d: none queued", k+1, jobs)
		}
		i := int(j.ConnectionID-out.ids[0]) + 1
		step := fmt.Sprintf("Namespace ns-%d", i)
		if err := db.StartJob(ctx, j.ID, worker, j.PlanHash, []string{step}, target(i) == workflow.StateApproved, at.Add(time.Second)); err != nil {
			return out, err
		}
		if err := db.StepStarted(ctx, j.ID, worker, 0, step, at.Add(2*time.Second)); err != nil {
			return out, err
		}
		if err := db.StepFinished(ctx, j.ID, worker, 0, step, "created", "", at.Add(3*time.Second)); err != nil {
			return out, err
		}
		if err := db.CompleteJob(ctx, j.ID, worker, at.Add(4*time.Second)); err != nil {
			return out, err
		}
		if (k+1)%batchSize == 0 || k+1 == jobs {
			if err := deliver(at.Add(5 * time.Second)); err != nil {
				return out, err
			}
		}
	}
	logf("benchseed: %s: %d provisioning jobs run", time.Since(t0).Round(time.Millisecond), jobs)
	// The reviews opened in the last hour, due between 30 days ago and 9
	// days ahead, each with its frozen evidence.
	err = db.InBatch(ctx, func(b *store.Batch) error {
		for i := 3; i <= s.Connections; i += 40 {
			at := now.Add(-time.Hour + time.Duration(out.underReview)*time.Second)
			in := workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, Detail: "The scheduled review of the contract is due",
				DueOn: at.AddDate(0, 0, out.underReview%40-30).Format(workflow.DateLayout)}
			if _, err := b.Command(out.ids[i-1], false, at, func(cs workflow.Conn) (workflow.Effect, error) {
				in.Evidence = []byte(`{"seed":"benchseed","contract_hash":"` + cs.ApprovedHash + `"}`)
				return workflow.OpenReview(cs, in, at)
			}); err != nil {
				return err
			}
			out.underReview++
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	return out, deliver(now.Add(-30 * time.Minute))
}

// seedHistory loads the bulk history: 30 days of every team's and the
// cluster's hourly usage, and the audit events that bring the trail to
// s.AuditEvents, chained onto head (see the package doc).
func seedHistory(ctx context.Context, dsn string, postgres bool, s Scale, conns seeded, head store.AuditHead) error {
	now := s.Now.UTC()
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
	// hour is the seed's last hour minus expr hours, in the stores' time
	// layout.
	lastHour := now.Truncate(time.Hour).Add(-time.Hour)
	hour := func(expr string) string {
		if postgres {
			return fmt.Sprintf(`to_char(TIMESTAMP '%s' - (%s) * INTERVAL '1 hour', 'YYYY-MM-DD"T"HH24:MI:SS".000000000Z"')`, lastHour.Format("2006-01-02 15:04:05"), expr)
		}
		return fmt.Sprintf(`strftime('%%Y-%%m-%%dT%%H:%%M:%%S.000000000Z', '%s', '-' || (%s) || ' hours')`, lastHour.Format("2006-01-02 15:04:05"), expr)
	}
	ts := func(t time.Time) string { return "'" + t.UTC().Format("2006-01-02T15:04:05.000000000Z") + "'" }
	hours := s.UsageDays * 24
	uw, uf := rows(s.Teams * hours)
	hw, hf := rows(hours)
	T := s.Teams
	stmts := []string{
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
	}
	if n := s.AuditEvents - head.Count; n > 0 {
		// The rest of the trail: one event per connection change, spread
		// over the connections, the first chained onto the last event the
		// commands appended.
		aw, af := rows(n)
		N, first := fmt.Sprint(s.Connections), fmt.Sprint(conns.ids[0])
		stmts = append(stmts, bulk("audit_events")+`INSERT INTO audit_events (at, actor_id, actor, action, object_type, object_id, team, version, reason, prev_hash, hash)
		 `+aw+`
		 SELECT `+ts(now.Add(-time.Minute))+`, NULL, 'seed@example.test', 'connection.seed', 'connection', `+first+` + (i - 1) % `+N+`,
		        'team-' || ((((i - 1) % `+N+` + 1) / 4) % `+fmt.Sprint(T)+`), 1, 'seeded by benchseed',
		        CASE WHEN i = 1 THEN '`+head.Hash+`' ELSE `+pad("i - 1")+` END, `+pad("i")+` FROM `+af)
	}
	if postgres {
		// Give the tables what a real installation's have: the planner's
		// statistics and a vacuumed heap. Without the VACUUM, PostgreSQL's
		// insert-driven autovacuum of the bulk load (autovacuum_vacuum_insert_threshold,
		// PostgreSQL 13+: https://www.postgresql.org/docs/current/routine-vacuuming.html#AUTOVACUUM)
		// may run later, during the measurements.
		stmts = append(stmts, `VACUUM (ANALYZE)`)
	}
	db, err := open(dsn, postgres)
	if err != nil {
		return err
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
			return fmt.Errorf("benchseed: %w\n%s", err, st)
		}
		if s.Logf != nil {
			line := strings.Join(strings.Fields(st), " ")
			s.Logf("benchseed: %s: %s", time.Since(t0).Round(time.Millisecond), line[:min(len(line), 80)])
		}
	}
	return nil
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
