package e2e

import (
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// signIn opens a fresh browser context and signs in as the demo user whose
// button reads "Sign in as <name>".
func signIn(t *testing.T, b playwright.Browser, p *portal, name string) playwright.Page {
	t.Helper()
	pg := newPage(t, b)
	_, err := pg.Goto(p.URL + "/login")
	mustOK(t, err, "start login")
	mustOK(t, pg.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in as " + name}).Click(), "choose "+name)
	mustOK(t, pg.WaitForURL(p.URL+"/"), "reach home as "+name)
	return pg
}

// TestOwnerRequestsAdminApproves is the contract journey: the owner of team
// red files a request from the example contract (fixing a mistake the form
// points out), submits it; the admin opens it from the queue, sees the
// capacity math, approves with a reason; the owner sees it approved.
func TestOwnerRequestsAdminApproves(t *testing.T) {
	b := browser(t)
	p := startPortal(t)

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	mustOK(t, owner.GetByTestId("nav-team-red").Click(), "open team red")
	mustOK(t, owner.GetByTestId("new-request").Click(), "new request")
	mustOK(t, owner.GetByTestId("use-example").Click(), "start from the example")
	// A mistake: the form keeps the input and says what is wrong, beside the field.
	mustOK(t, owner.Locator("#account_id").Fill("12345"), "type a bad account id")
	mustOK(t, owner.GetByTestId("save-submit").Click(), "save and submit")
	mustOK(t, owner.GetByTestId("error-account_id").WaitFor(), "see the account id error")
	if v, _ := owner.Locator("#account_id").InputValue(); v != "12345" {
		t.Errorf("the form lost the input: %q", v)
	}
	screenshot(t, owner, "10-form-error")
	mustOK(t, owner.Locator("#account_id").Fill("111122223333"), "fix the account id")
	mustOK(t, owner.GetByTestId("save-submit").Click(), "save and submit again")
	mustOK(t, owner.WaitForURL("**/connections/1"), "reach the request")
	if got := text(t, owner, "connection-state"); got != "Submitted" {
		t.Errorf("state after submit = %q", got)
	}
	screenshot(t, owner, "11-submitted")

	admin := signIn(t, b, p, "Ada Admin")
	mustOK(t, admin.GetByTestId("nav-admin").Click(), "open the admin queue")
	mustOK(t, admin.GetByTestId("queue-1").Locator("a").First().Click(), "open request 1")
	mustOK(t, admin.GetByTestId("capacity").WaitFor(), "see the capacity math")
	if got := text(t, admin, "capacity"); !strings.Contains(got, "ml.p5.48xlarge") || !strings.Contains(got, "fits") {
		t.Errorf("capacity table = %q", got)
	}
	screenshot(t, admin, "12-approval-page")
	mustOK(t, admin.GetByTestId("approve").Click(), "approve without a reason")
	mustOK(t, admin.GetByTestId("error-reason").WaitFor(), "be asked for a reason")
	mustOK(t, admin.Locator("#reason").Fill("Fits the cluster; owners confirmed."), "give a reason")
	mustOK(t, admin.GetByTestId("approve").Click(), "approve")
	mustOK(t, admin.WaitForURL("**/connections/1"), "back on the request")
	if got := text(t, admin, "connection-state"); got != "Approved" {
		t.Errorf("state after approval = %q", got)
	}
	screenshot(t, admin, "13-approved")

	_, err := owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "decisions"); !strings.Contains(got, "Fits the cluster") {
		t.Errorf("owner sees decisions %q", got)
	}
}
