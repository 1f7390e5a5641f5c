package benchseed_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/benchseed"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/testenv"
)

// TestSeededPagesServe seeds a small installation and checks, through the
// real `portal serve --dev` signed in as the demo admin (the review
// queue as the demo reviewer), that each of the
// six pages the benchmark measures is a 200 showing the seeded data: on
// SQLite, and on PostgreSQL when the test bed's is there
// (PORTAL_TEST_POSTGRES_URL; `make test` sets it).
func TestSeededPagesServe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "portal")
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
				benchseed.Scale{Connections: 200, Teams: 20, AuditEvents: 300, UsageDays: 30, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
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
