package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestReviewerRenewsADueReview: with make run's demo reviews (--dev
// --demo-reviews) the reviewer's home card counts a due and an overdue
// review; the queue lists the overdue one first with its days overdue,
// labelled demo data; the reviewer opens the one due today, reads its
// frozen evidence (and what could not be collected), renews it with a
// reason, and the connection shows active with its next review date.
func TestReviewerRenewsADueReview(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t, "--demo-reviews")

	pg := signIn(t, b, p, "Rita Reviewer")
	if got := text(t, pg, "card-reviews"); !strings.Contains(got, "2 open, 1 overdue") {
		t.Errorf("reviews card = %q", got)
	}
	clickTo(t, pg, pg.GetByTestId("card-reviews").Locator("a"), p.URL+"/reviews", "open the review queue")
	rows := pg.Locator(`[data-testid="review-queue"] tbody tr`)
	if n := count(t, rows, "queue rows"); n != 2 {
		t.Fatalf("%d reviews in the queue, want 2", n)
	}
	first, err := rows.First().TextContent()
	mustOK(t, err, "read the first row")
	if !strings.Contains(first, "9 days overdue") || !strings.Contains(first, "demo data") {
		t.Errorf("first row = %q, want the overdue demo review", strings.Join(strings.Fields(first), " "))
	}
	screenshot(t, pg, "review-01-queue")

	clickTo(t, pg, pg.GetByTestId("review-1").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Review #1"}), p.URL+"/reviews/1", "open the review due today")
	if got := text(t, pg, "demo-notice"); !strings.Contains(got, "Demo data") {
		t.Errorf("demo notice = %q", got)
	}
	if got := text(t, pg, "evidence-contract"); !strings.Contains(got, "Version 1") {
		t.Errorf("evidence contract = %q", got)
	}
	if got := text(t, pg, "evidence-gaps"); !strings.Contains(got, "Not collected: drift") {
		t.Errorf("evidence gaps = %q", got)
	}
	if got := text(t, pg, "evidence-owners"); !strings.Contains(got, "demo.owner@example.test") {
		t.Errorf("owners = %q", got)
	}
	if got := text(t, pg, "evidence-hash"); len(got) != 64 {
		t.Errorf("evidence hash = %q", got)
	}
	screenshot(t, pg, "review-02-evidence")

	mustOK(t, pg.GetByTestId("decision-renew").Check(), "choose renew")
	mustOK(t, pg.GetByTestId("reason").Fill("Still used for the support assistant; owners confirmed."), "give a reason")
	before := time.Now()
	clickTo(t, pg, pg.GetByTestId("review-submit"), p.URL+"/reviews/1", "renew")
	after := time.Now()
	if got := text(t, pg, "review-decision"); !strings.Contains(got, "Renew") || !strings.Contains(got, "reviewer@example.test") || !strings.Contains(got, "owners confirmed") {
		t.Errorf("decision = %q", got)
	}
	screenshot(t, pg, "review-03-renewed")

	clickTo(t, pg, pg.GetByTestId("review-connection"), p.URL+"/connections/1", "open the connection")
	if got := text(t, pg, "connection-state"); got != "Active" {
		t.Errorf("connection state = %q, want Active", got)
	}
	due := text(t, pg, "next-review-due")
	// The demo contract's cadence is 90 days; the renewal's day is the
	// portal's clock's, between before and after.
	if !strings.Contains(due, workflow.NextReviewDue(before, 90, "")) && !strings.Contains(due, workflow.NextReviewDue(after, 90, "")) {
		t.Errorf("next review = %q, want due %s", due, workflow.NextReviewDue(after, 90, ""))
	}
	if got := text(t, pg, "review-history"); !strings.Contains(got, "owners confirmed") {
		t.Errorf("review history = %q", got)
	}
	screenshot(t, pg, "review-04-connection")
}
