package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/store"
)

// TestAdminGrantsAnExceptionUntilItExpires walks an exception with an
// expiry from grant to expiry in the browser, on the portal in dry-run
// mode with the demo connections (live, of teams outside the demo users'):
// the admin grants a priority class the contract does not allow, a missing
// reason first (the rest kept on the form); the connection and member pages show it
// with its end; its end is moved to the past in the database (the shortest
// grant is a day); the worker's sweep reverts it through a reapply job,
// and the page shows it reverted, with the revert in the history.
func TestAdminGrantsAnExceptionUntilItExpires(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t, "--demo-reviews")
	admin := signIn(t, b, p, "Ada Admin")
	_, err := admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "open demo connection 1")
	mustOK(t, admin.GetByTestId("exception-grant-form").WaitFor(), "see the grant form")

	// A bad input: no reason. The form says so and keeps the class and
	// the days (the browser itself holds the days to 1..max).
	_, err = admin.GetByTestId("exception-class").SelectOption(playwright.SelectOptionValues{Values: &[]string{"experiment"}})
	mustOK(t, err, "choose the class")
	mustOK(t, admin.GetByTestId("exception-days").Fill("1"), "type 1 day")
	clickTo(t, admin, admin.GetByTestId("exception-grant"), "**/connections/1/exceptions", "grant without a reason")
	mustOK(t, admin.GetByTestId("error-reason").WaitFor(), "see the reason error")
	if v, err := admin.GetByTestId("exception-days").InputValue(); err != nil || v != "1" {
		t.Errorf("the form lost the days: %q (%v)", v, err)
	}
	if v, err := admin.GetByTestId("exception-class").InputValue(); err != nil || v != "experiment" {
		t.Errorf("the form lost the class: %q (%v)", v, err)
	}
	screenshot(t, admin, "60-exception-error")
	mustOK(t, admin.GetByTestId("exception-reason").Fill("The board demo runs on Friday."), "give the reason")
	clickTo(t, admin, admin.GetByTestId("exception-grant"), "**/connections/1*", "grant")
	row := admin.GetByTestId("exception-row")
	mustOK(t, row.WaitFor(), "see the exception")
	end := text(t, admin, "exception-end")
	if end == "" {
		t.Fatal("the exception shows no end")
	}
	// The grant queued a reapply job the page follows live: wait for it
	// to finish (and the page to reload) before the capture.
	settled(t, admin, "the page settles after the grant's job")
	screenshot(t, admin, "61-exception-granted")

	h1, err := admin.Locator("h1").First().TextContent()
	mustOK(t, err, "read the heading")
	_, team, ok := strings.Cut(h1, "team ")
	if team = strings.TrimSpace(team); !ok || team == "" {
		t.Fatalf("no team in the heading %q", h1)
	}
	_, err = admin.Goto(p.URL + "/teams/" + team + "/submit")
	mustOK(t, err, "open the member page")
	if got := text(t, admin, "member-exception"); !strings.Contains(got, end) || !strings.Contains(got, "experiment") {
		t.Errorf("member page exception = %q, want the class until %s", got, end)
	}

	// The end passes (moved in the database; the sweep reads the clock).
	ctx := context.Background()
	db, err := store.Open(ctx, p.DB)
	mustOK(t, err, "open the portal's database")
	mustOK(t, db.ExecForTest(ctx, `UPDATE exceptions SET ends_at = '`+time.Now().UTC().Add(-time.Millisecond).Format("2006-01-02T15:04:05.000000000Z")+`' WHERE id = 1`), "move the end")
	db.Close()

	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := admin.Goto(p.URL + "/connections/1")
		mustOK(t, err, "reload the connection")
		// The revert queues a reapply job, which the page follows and then
		// reloads itself for (static/progress.js): let it, or the next Goto
		// is "interrupted by another navigation" (ci33).
		settled(t, admin, "the page settles after a reload")
		n, err := admin.Locator(`[data-testid="exception-row"][data-state="reverted"]`).Count()
		mustOK(t, err, "look for the reverted exception")
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exception was not reverted within 90 s: %q", text(t, admin, "exception-status"))
		}
		time.Sleep(2 * time.Second)
	}
	settled(t, admin, "the page settles after the revert")
	screenshot(t, admin, "62-exception-reverted")
	if got := text(t, admin, "exception-status"); !strings.Contains(got, "reverted") {
		t.Errorf("status = %q", got)
	}
}
