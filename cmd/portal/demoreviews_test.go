package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// make run's demo reviews: two active demo connections, one review due
// today and one overdue, labelled demo data, with evidence in the frozen
// evidence's shape; a restart (a second seed) adds nothing.
func TestSeedDemoReviewsOnceAndLabelled(t *testing.T) {
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
	cluster := provision.DefaultClusterSettings()
	if n, err := seedDemoReviews(ctx, db, cluster, now); err != nil || n != 2 {
		t.Fatalf("seed = %d, %v; want 2 reviews", n, err)
	}
	q, err := db.ReviewQueue(ctx, store.ReviewFilter{}, 10)
	if err != nil || len(q) != 2 {
		t.Fatalf("queue = %+v, %v", q, err)
	}
	overdue, due := q[0], q[1]
	if workflow.DaysOverdue(overdue.DueOn, now) == 0 || due.DueOn != "2026-12-01" {
		t.Errorf("due dates %s and %s, want one overdue and one due today", overdue.DueOn, due.DueOn)
	}
	for _, r := range q {
		if !r.Demo {
			t.Errorf("review %d is not labelled demo data", r.ID)
		}
		var ev workflow.Evidence
		if err := json.Unmarshal(r.Evidence, &ev); err != nil || ev.Contract.Version != 1 || len(ev.Gaps) == 0 {
			t.Errorf("review %d evidence: %v %+v", r.ID, err, ev)
		}
		c, _ := db.Connection(ctx, r.ConnectionID)
		if c.State != workflow.StateUnderReview || c.ApprovedVersion != 1 {
			t.Errorf("demo connection %d: %s v%d", c.ID, c.State, c.ApprovedVersion)
		}
	}
	if n, err := seedDemoReviews(ctx, db, cluster, now.Add(5*time.Hour)); err != nil || n != 0 {
		t.Fatalf("second seed = %d, %v; want nothing", n, err)
	}
	if q2, _ := db.ReviewQueue(ctx, store.ReviewFilter{}, 10); len(q2) != 2 {
		t.Errorf("a restart seeded again: %d reviews", len(q2))
	}
}
