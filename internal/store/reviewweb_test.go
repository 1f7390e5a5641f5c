package store_test

import (
	"errors"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The queue pages in its order (due first, then opened) with a cursor;
// the counts split overdue reviews; a recommendation of revocation waits
// for an admin until declined, and declining it returns the connection to
// active with its next due date, once.
func TestReviewQueuePagesAndRecommendations(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	reviewer, admin := f.user("reviewer"), f.user("admin-x")
	dues := map[string]string{"red": "2025-02-10", "blue": "2025-01-05", "green": "2025-02-10", "amber": "2025-03-30"}
	ids := map[string]int64{}
	conns := map[string]int64{}
	for _, team := range []string{"red", "blue", "green", "amber"} {
		c := f.active(team)
		r, err := f.db.OpenReview(ctx, c.ID, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: dues[team]}, f.tick())
		if err != nil {
			t.Fatal(err)
		}
		ids[team], conns[team] = r.ID, c.ID
	}
	var got []string
	var cur store.ReviewCursor
	for range 3 {
		page, next, err := f.db.ReviewQueuePage(ctx, store.ReviewFilter{}, cur, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.Team)
		}
		if next.ID == 0 {
			break
		}
		cur = next
	}
	if want := []string{"blue", "red", "green", "amber"}; !equal(got, want) {
		t.Errorf("queue order %v, want %v", got, want)
	}
	if open, overdue, err := f.db.ReviewCounts(ctx, "2025-02-10"); err != nil || open != 4 || overdue != 1 {
		t.Errorf("counts = %d open, %d overdue, %v; want 4, 1", open, overdue, err)
	}
	if teams, _ := f.db.ReviewTeams(ctx); !equal(teams, []string{"amber", "blue", "green", "red"}) {
		t.Errorf("teams = %v", teams)
	}

	// red: recommended for revocation; it waits for an admin.
	if _, err := f.db.DecideReview(ctx, ids["red"], reviewer, workflow.DecideReviewInput{Decision: workflow.ReviewRecommendRevocation, Reason: "project ended"}, f.tick()); err != nil {
		t.Fatal(err)
	}
	recs, err := f.db.RevocationRecommended(ctx, 10)
	if err != nil || len(recs) != 1 || recs[0].ConnectionID != conns["red"] {
		t.Fatalf("recommendations = %+v, %v", recs, err)
	}
	if _, ok, _ := f.db.PendingRecommendation(ctx, conns["blue"]); ok {
		t.Error("blue (open review) has a pending recommendation")
	}
	// The requester cannot decline; nothing to decline on blue.
	if _, err := f.db.DeclineRevocation(ctx, conns["red"], f.owner, "mine", f.tick()); !errors.Is(err, workflow.ErrNotIndependent) {
		t.Errorf("requester's decline = %v", err)
	}
	if _, err := f.db.DeclineRevocation(ctx, conns["blue"], admin, "keep", f.tick()); !errors.Is(err, workflow.ErrNoRecommendation) {
		t.Errorf("decline without a recommendation = %v", err)
	}
	now := f.tick()
	c, err := f.db.DeclineRevocation(ctx, conns["red"], admin, "still needed", now)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != workflow.StateActive || c.ReviewDue != workflow.NextReviewDue(now, 0, "") {
		t.Errorf("after decline: %s due %q", c.State, c.ReviewDue)
	}
	if recs, _ := f.db.RevocationRecommended(ctx, 10); len(recs) != 0 {
		t.Errorf("a declined recommendation still waits: %+v", recs)
	}
	if _, err := f.db.DeclineRevocation(ctx, conns["red"], admin, "again", f.tick()); err == nil {
		t.Error("a second decline was recorded")
	}
	acts := f.auditActions(conns["red"])
	if acts[len(acts)-1] != "review.decline_revocation" {
		t.Errorf("audit %v, want review.decline_revocation last", acts)
	}
	f.verifyAudit()
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
