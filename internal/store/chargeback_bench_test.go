package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/benchseed"
	"github.com/hyperpod-governance/portal/internal/support/benchtable"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// chargeTeams is the scale of BenchmarkMonthChargeback1000Teams.
const chargeTeams = 1000

// BenchmarkMonthChargeback1000Teams is the usage row of
// ../shared/docs/performance.md, "month's chargeback at 1,000 teams < 100
// ms": a database seeded like a large installation (internal/support/benchseed:
// 4,000 connections across 1,000 teams, made through the portal's
// commands, and every team's hourly usage and the cluster's capacity for
// the whole of November 2026, 720,000 usage rows), and November's
// chargeback computed through usage.CostsOf, the one function that
// computes money (the finance page, a team's usage page and statement,
// the month's closing and the review evidence all call it): its read of
// the period from the store (CostInputSummed), the pricing with the demo
// rate card (hack/demo-rate-card.json, which changes ml.p5.48xlarge's
// rate in 2026, before November) and the accelerator table of the
// default cluster settings, and the charge under the store's cost policy.
// One call comes first, unmeasured, and is checked: every team charged,
// nothing unpriced. The row (recorded through internal/support/benchtable)
// is the mean time of a call, less than 100 ms; beside it, for reference,
// the charge alone of the input already read (usage.Charge). On SQLite
// and, when the test bed has it (PORTAL_TEST_POSTGRES_URL), PostgreSQL.
// The seeding runs once per engine (b.Loop runs the function once);
// -benchtime sets the calls:
//
//	go test -run '^$' -bench '^BenchmarkMonthChargeback1000Teams$' -benchtime=20x ./internal/store/
func BenchmarkMonthChargeback1000Teams(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchMonthCharge(b, "sqlite", filepath.Join(b.TempDir(), "portal.db")) })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv("PORTAL_TEST_POSTGRES_URL") == "" {
			b.Skip("no PostgreSQL (PORTAL_TEST_POSTGRES_URL unset): run `make bench` or `make test`")
		}
		benchMonthCharge(b, "postgres", testenv.PostgresDB(b, "portal_charge", false))
	})
}

func benchMonthCharge(b *testing.B, engine, dsn string) {
	ctx := context.Background()
	db, err := store.OpenMigrated(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	// The seed's today is December 1st: its 30 days of usage are November.
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	if _, err := benchseed.Seed(ctx, dsn, benchseed.Scale{Connections: 4 * chargeTeams, Teams: chargeTeams, AuditEvents: 1, UsageDays: 30, Now: now}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: seeded %d teams, 30 days of usage in %s", engine, chargeTeams, time.Since(t0).Round(time.Second))
	if db, err = store.Open(ctx, dsn); err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	card, err := os.ReadFile("../../hack/demo-rate-card.json")
	if err != nil {
		b.Fatal(err)
	}
	rates, err := usage.ParseRateCard(card)
	if err != nil {
		b.Fatal(err)
	}
	pricing := usage.Pricing{Rates: rates, Accelerators: usage.AcceleratorsOf(provision.DefaultClusterSettings().AcceleratorTable())}
	pol, err := db.CostPolicy(ctx)
	if err != nil {
		b.Fatal(err)
	}
	month := usage.MonthOf(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

	c, err := usage.CostsOf(ctx, db, month, pol.Policy, pricing)
	if err != nil {
		b.Fatal(err)
	}
	if len(c.Teams) != chargeTeams || len(c.Unpriced) > 0 || !c.Priced {
		b.Fatalf("November's chargeback: %d teams, unpriced %+v, priced %v; want %d teams, all priced", len(c.Teams), c.Unpriced, c.Priced, chargeTeams)
	}
	for _, t := range c.Teams {
		if t.Total.Minor <= 0 {
			b.Fatalf("team %s charged %+v for a month of usage", t.Team, t.Total)
		}
	}
	t1 := time.Now()
	if _, err := usage.Charge(c.Input); err != nil {
		b.Fatal(err)
	}
	chargeOnly := time.Since(t1)

	n := 0
	t0 = time.Now()
	for b.Loop() {
		if _, err := usage.CostsOf(ctx, db, month, pol.Policy, pricing); err != nil {
			b.Fatal(err)
		}
		n++
	}
	mean := time.Since(t0) / time.Duration(n)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.Logf("%s: November at %d teams (%d input rows summed): %.1f ms a call (mean of %d); the charge alone %.1f ms",
		engine, chargeTeams, len(c.Input.Hours), ms(mean), n, ms(chargeOnly))
	if err := benchtable.Record(b, benchtable.Row{
		Figure: fmt.Sprintf("usage/%s: month's chargeback at %d teams (usage.CostsOf: read, price, charge)", engine, chargeTeams),
		Value:  ms(mean), Unit: "ms", Baseline: ms(chargeOnly), BaselineName: "the charge alone",
		Kind: benchtable.Below, Limit: 100,
	}); err != nil {
		b.Error(err)
	}
}
