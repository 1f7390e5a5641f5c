package e2e

import (
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// TestOwnerLogsInAndOut is the walking skeleton's journey: an owner of team
// red opens the portal, signs in through the development identity provider's
// login page, sees name, team and role, opens the team page, and signs out.
func TestOwnerLogsInAndOut(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t)
	pg := newPage(t, b)

	_, err := pg.Goto(p.URL + "/")
	mustOK(t, err, "open the portal")
	if !strings.Contains(text(t, pg, "dev-banner"), "Development identity provider") {
		t.Error("the development banner is missing")
	}
	screenshot(t, pg, "01-landing")

	clickTo(t, pg, pg.GetByTestId("login"), "**/dev-idp/login**", "click Sign in")
	screenshot(t, pg, "02-dev-idp-login")
	clickTo(t, pg, pg.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in as Olivia Owner (Red)"}), p.URL+"/", "sign in as owner.red")

	if got := text(t, pg, "user-name"); got != "Olivia Owner (Red)" {
		t.Errorf("name in the header = %q", got)
	}
	if got := text(t, pg, "user-email"); got != "owner.red@example.test" {
		t.Errorf("email = %q", got)
	}
	if got := text(t, pg, "user-teams"); !strings.Contains(got, "red") || !strings.Contains(got, "owner") {
		t.Errorf("teams = %q, want red (owner)", got)
	}
	if got := text(t, pg, "user-roles"); got != "none" {
		t.Errorf("portal-wide roles = %q, want none", got)
	}
	if n := count(t, pg.GetByTestId("nav-admin"), "Admin links"); n != 0 {
		t.Error("an owner sees the Admin link")
	}
	screenshot(t, pg, "03-home-owner-red")

	clickTo(t, pg, pg.GetByTestId("nav-team-red"), p.URL+"/teams/red", "open team red")
	if got := text(t, pg, "team-home-empty"); !strings.Contains(got, "No connection yet") {
		t.Errorf("team page = %q", got)
	}
	screenshot(t, pg, "04-team-red")

	// Another team's page does not exist for this owner.
	resp, err := pg.Goto(p.URL + "/teams/blue")
	mustOK(t, err, "open team blue")
	if resp.Status() != 404 {
		t.Errorf("team blue for owner.red = %d, want 404", resp.Status())
	}
	screenshot(t, pg, "05-not-found")

	_, err = pg.Goto(p.URL + "/")
	mustOK(t, err, "back home")
	clickTo(t, pg, pg.GetByTestId("logout"), p.URL+"/signed-out", "sign out")
	if got := text(t, pg, "signed-out"); !strings.Contains(got, "signed out") {
		t.Errorf("signed-out page says %q", got)
	}
	screenshot(t, pg, "06-signed-out")

	// Signed out for real: a protected page sends us to sign in again.
	_, err = pg.Goto(p.URL + "/teams/red")
	mustOK(t, err, "open team red after logout")
	mustOK(t, pg.WaitForURL("**/dev-idp/login**"), "be asked to sign in again")
}

// TestEveryDemoAccountSignsIn checks each role's home page in the browser.
func TestEveryDemoAccountSignsIn(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t)
	cases := []struct {
		button, card, nav, path string
	}{
		{"Sign in as Mateo Member (Red)", "card-team-red", "nav-team-red", "/teams/red"},
		{"Sign in as Bianca Owner (Blue)", "card-team-blue", "nav-team-blue", "/teams/blue"},
		{"Sign in as Ada Admin", "card-admin", "nav-admin", "/admin"},
		{"Sign in as Rita Reviewer", "card-reviews", "nav-reviews", "/reviews"},
		{"Sign in as Felix Finance", "card-finance", "nav-finance", "/finance"},
	}
	for _, tc := range cases {
		t.Run(tc.card, func(t *testing.T) {
			pg := newPage(t, b)
			_, err := pg.Goto(p.URL + "/login")
			mustOK(t, err, "start login")
			clickTo(t, pg, pg.GetByRole("button", playwright.PageGetByRoleOptions{Name: tc.button}), p.URL+"/", tc.button)
			if n := count(t, pg.GetByTestId(tc.card), tc.card); n != 1 {
				t.Errorf("home lacks %s", tc.card)
			}
			clickTo(t, pg, pg.GetByTestId(tc.nav), p.URL+tc.path, "follow "+tc.nav)
			if n := count(t, pg.GetByTestId("error-page"), "error pages"); n != 0 {
				t.Errorf("%s leads to an error page", tc.nav)
			}
			screenshot(t, pg, "home-"+tc.card)
		})
	}
}

// TestUserInNoGroupSeesWhy checks the no-access page in the browser.
func TestUserInNoGroupSeesWhy(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t)
	pg := newPage(t, b)
	_, err := pg.Goto(p.URL + "/login")
	mustOK(t, err, "start login")
	// The provider sends the browser back to the callback, which answers
	// with the no-access page.
	clickTo(t, pg, pg.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in as Nora No-Group"}), "**/auth/callback**", "sign in as nogroup")
	mustOK(t, pg.GetByTestId("error-title").WaitFor(), "see the error page")
	if got := text(t, pg, "error-title"); !strings.Contains(got, "no access") {
		t.Errorf("title = %q", got)
	}
	screenshot(t, pg, "no-group")
}
