package benchseed_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/benchseed"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// TestSeededPagesServe seeds a small installation, checks that its
// connections are what the portal's commands write (checkSeeded), and
// checks, through the
// real `portal serve --dev` signed in as the demo admin (the review
// queue as the demo reviewer, the finance page as the demo finance user),
// that each of the seven pages the benchmark measures is a 200 showing the
// seeded data: on
// SQLite, and on PostgreSQL when the test bed's is there
// (PORTAL_TEST_POSTGRES_URL; `make test` sets it).
func TestSeededPagesServe(t *testing.T) {
	bin := testenv.BinPath("portal-benchseed", t.TempDir())
	testenv.MustGoBuild(t, bin, "./cmd/portal", "-s -w")
	engines := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "portal.db") }},
		{"postgres", func(t *testing.T) string {
			if os.Getenv("PORTAL_TEST_POSTGRES_URL") == "" {
				t.Skip("PORTAL_TEST_POSTGRES_URL is not set: start the test bed (make test does)")
			}
			return testenv.PostgresDB(t, "portal_benchseed", false)
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			dsn := eng.dsn(t)
			ctx := context.Background()
			db, err := store.OpenMigrated(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			seeded, err := benchseed.Seed(ctx, dsn,
				benchseed.Scale{Connections: 200, Teams: 20, AuditEvents: 3000, UsageDays: 30, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			checkSeeded(t, dsn, seeded)
			cmd := exec.Command(bin, "serve", "--dev", "--listen", "127.0.0.1:0", "--db", dsn,
				"--rate-card", filepath.Join(testenv.ModuleRoot(), "hack", "demo-rate-card.json"))
			cmd.Dir = t.TempDir()
			s := testenv.StartServe(t, cmd)
			sessions, err := benchseed.SignInAll(s.URL, seeded.Pages())
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := benchseed.Check(s.URL, sessions, seeded.Pages()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkSeeded checks that the 200 seeded connections are what the portal's
// commands write (the package doc), not rows written around them: each
// state has its share, each connection the audit events, decisions and
// jobs of the commands that brought it there, the capacity totals apply
// keeps equal the sum over the live connections' rows, and the facts
// Seed gave the approvals (no claim taken twice) are the store's.
func checkSeeded(t *testing.T, dsn string, seeded benchseed.Seeded) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	driver, name := "sqlite", dsn
	if strings.HasPrefix(dsn, "postgres") {
		driver = "pgx"
	}
	raw, err := sql.Open(driver, name)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	count := func(q string) int {
		t.Helper()
		var n int
		if err := raw.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for _, c := range []struct {
		what string
		q    string
		want int
	}{
		{"drafts", `SELECT count(*) FROM connections WHERE state = 'draft'`, 50},
		{"submitted", `SELECT count(*) FROM connections WHERE state = 'submitted'`, 50},
		{"approved", `SELECT count(*) FROM connections WHERE state = 'approved'`, 50},
		{"active", `SELECT count(*) FROM connections WHERE state = 'active'`, 45},
		{"under review", `SELECT count(*) FROM connections WHERE state = 'under_review'`, 5},
		{"open reviews", `SELECT count(*) FROM reviews WHERE decision = ''`, seeded.OpenReviews},
		{"creations", `SELECT count(*) FROM audit_events WHERE action = 'connection.create'`, 200},
		{"submissions", `SELECT count(*) FROM audit_events WHERE action = 'connection.submit'`, 150},
		{"approvals", `SELECT count(*) FROM decisions WHERE kind = 'approve'`, 100},
		{"approval events", `SELECT count(*) FROM audit_events WHERE action = 'connection.approve'`, 100},
		{"dry runs", `SELECT count(*) FROM audit_events WHERE action = 'provisioning.dry_run'`, 50},
		{"activations", `SELECT count(*) FROM audit_events WHERE action = 'provisioning.succeeded'`, 50},
		{"review openings", `SELECT count(*) FROM audit_events WHERE action = 'review.open'`, 5},
		{"succeeded jobs", `SELECT count(*) FROM jobs WHERE state = 'succeeded'`, 100},
		{"unfinished jobs", `SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')`, 0},
		{"active without a review date", `SELECT count(*) FROM connections WHERE state IN ('active', 'under_review') AND review_due = ''`, 0},
		{"undelivered notices", `SELECT count(*) FROM outbox WHERE dispatched_at = ''`, 0},
		{"trail", `SELECT count(*) FROM audit_events`, seeded.AuditEvents},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	if seeded.AuditEvents != 3000 {
		t.Errorf("the trail holds %d events, want the 3000 asked for", seeded.AuditEvents)
	}
	// The totals apply keeps (migration 00021), as the approvals read them,
	// next to the sum over the live connections' approved versions.
	held, err := db.CommittedCapacity(ctx, benchseed.Cluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := count(`SELECT coalesce(sum(vc.count), 0) FROM connections c JOIN version_capacity vc ON vc.connection_id = c.id AND vc.version = c.approved_version
WHERE c.state IN ('approved', 'provisioning', 'active', 'under_review', 'revoking')`)
	if len(held) != 1 || held[0].InstanceType != benchseed.InstanceType || held[0].Count != rows || rows != 200 {
		t.Errorf("capacity held: totals %+v, rows %d; want %d of %s in both", held, rows, 200, benchseed.InstanceType)
	}
	// No namespace or role of the detail page's connection is claimed by
	// another: the claims Seed gave its approvals as none.
	v, err := db.Version(ctx, seeded.DetailID, 1)
	if err != nil {
		t.Fatal(err)
	}
	env := db.ValidationEnv(ctx, time.Now(), seeded.DetailID, nil)
	if claims := v.Contract.ClaimConflicts(env); len(claims) > 0 || env.Unavailable() != nil {
		t.Errorf("connection %d's claims are taken: %v (%v)", seeded.DetailID, claims, env.Unavailable())
	}
}
