package main

import (
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// The demo seed writes 60 days of demo rows once: a restart (a second
// seed, later) neither adds nor changes rows.
func TestSeedDemoUsageOnceAndLabelled(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, t.TempDir()+"/portal.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := seedDev(ctx, db); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 16, 20, 0, 0, time.UTC)
	if n, err := seedDemoUsage(ctx, db, now); err != nil || n == 0 {
		t.Fatalf("seed = %d, %v", n, err)
	}
	all := store.UsageFilter{From: now.AddDate(0, 0, -90), To: now.Add(time.Hour)}
	rows, err := db.UsageHours(ctx, all)
	if err != nil || len(rows) == 0 {
		t.Fatalf("no demo rows: %v", err)
	}
	teams := map[string]bool{}
	for _, r := range rows {
		if r.Source != usage.SourceDemo {
			t.Fatalf("seeded row not labelled demo: %+v", r)
		}
		if r.Start.Before(now.Add(-60*24*time.Hour-time.Hour)) || !r.Start.Before(usage.HourStart(now)) {
			t.Fatalf("row outside the 60 days before now: %s", r.Start)
		}
		teams[r.Team] = true
	}
	if !teams["red"] || !teams["blue"] {
		t.Errorf("demo teams: %v", teams)
	}
	missing, _ := db.MissingIn(ctx, all.From, all.To)
	cluster, _ := db.ClusterHours(ctx, "", all.From, all.To)
	if len(missing) != 1 || len(cluster) == 0 {
		t.Errorf("%d missing periods, %d cluster hours", len(missing), len(cluster))
	}
	if n, err := seedDemoUsage(ctx, db, now.Add(5*time.Hour)); err != nil || n != 0 {
		t.Fatalf("second seed = %d, %v; want nothing", n, err)
	}
	again, _ := db.UsageHours(ctx, store.UsageFilter{From: all.From, To: all.To.Add(10 * time.Hour)})
	missing2, _ := db.MissingIn(ctx, all.From, all.To)
	if len(again) != len(rows) || len(missing2) != 1 {
		t.Errorf("a restart seeded again: %d rows → %d, %d missing periods", len(rows), len(again), len(missing2))
	}
}
