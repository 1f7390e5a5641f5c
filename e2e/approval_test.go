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
	clickTo(t, pg, pg.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in as " + name}), p.URL+"/", "sign in as "+name)
	return pg
}

// TestOwnerRequestsAdminApproves is the contract journey: the owner of team
// red files a request from the example contract (fixing a mistake the form
// points out), submits it; the admin opens it from the queue, sees the
// capacity math, approves with a reason; the owner sees it approved.
func TestOwnerRequestsAdminApproves(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t)

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	clickTo(t, owner, owner.GetByTestId("nav-team-red"), "**/teams/red", "open team red")
	clickTo(t, owner, owner.GetByTestId("new-request"), "**/teams/red/connections/new", "new request")
	clickTo(t, owner, owner.GetByTestId("use-example"), "**/teams/red/connections/new?example=1", "start from the example")
	// A mistake: the form keeps the input and says what is wrong, beside the field.
	mustOK(t, owner.Locator("#account_id").Fill("12345"), "type a bad account id")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/teams/red/connections", "save and submit")
	mustOK(t, owner.GetByTestId("error-account_id").WaitFor(), "see the account id error")
	if v, err := owner.Locator("#account_id").InputValue(); err != nil || v != "12345" {
		t.Errorf("the form lost the input: %q (%v)", v, err)
	}
	screenshot(t, owner, "10-form-error")
	mustOK(t, owner.Locator("#account_id").Fill("111122223333"), "fix the account id")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/connections/1", "save and submit again")
	if got := text(t, owner, "connection-state"); got != "Submitted" {
		t.Errorf("state after submit = %q", got)
	}
	screenshot(t, owner, "11-submitted")

	admin := signIn(t, b, p, "Ada Admin")
	openFromQueue := func() {
		t.Helper()
		clickTo(t, admin, admin.GetByTestId("nav-admin"), "**/admin", "open the admin queue")
		clickTo(t, admin, admin.GetByTestId("queue-1").Locator("a").First(), "**/connections/1", "open request 1")
		mustOK(t, admin.GetByTestId("capacity").WaitFor(), "see the capacity math")
	}
	openFromQueue()
	if got := text(t, admin, "capacity"); !strings.Contains(got, "ml.p5.48xlarge") || !strings.Contains(got, "fits") {
		t.Errorf("capacity table = %q", got)
	}
	screenshot(t, admin, "12-approval-page")
	// The admin asks for changes (a reason is required).
	clickTo(t, admin, admin.GetByTestId("request-changes"), "**/connections/1/decide", "request changes without a reason")
	mustOK(t, admin.GetByTestId("error-reason").WaitFor(), "be asked for a reason")
	mustOK(t, admin.Locator("#reason").Fill("Lower the borrow limit to 20%."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("request-changes"), "**/connections/1", "request changes")
	mustOK(t, admin.GetByTestId("decisions").WaitFor(), "see the decision recorded")

	// The owner sees why, fixes the contract and resubmits.
	_, err := owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "connection-state"); got != "Changes requested" {
		t.Errorf("owner sees state %q", got)
	}
	if got := text(t, owner, "decisions"); !strings.Contains(got, "Lower the borrow limit") {
		t.Errorf("owner sees decisions %q", got)
	}
	clickTo(t, owner, owner.GetByTestId("edit"), "**/connections/1/edit", "edit")
	mustOK(t, owner.Locator("#borrow_limit_percent").Fill("20"), "lower the borrow limit")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/connections/1", "save and resubmit")
	if got := text(t, owner, "diff"); !strings.Contains(got, "Borrow limit") {
		t.Errorf("the diff after the edit = %q", got)
	}

	// The admin approves version 2.
	openFromQueue()
	mustOK(t, admin.Locator("#reason").Fill("Fits the cluster; owners confirmed."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("approve"), "**/connections/1", "approve")
	if got := text(t, admin, "connection-state"); got != "Approved" {
		t.Errorf("state after approval = %q", got)
	}
	// No cluster is configured in `serve --dev`: the provisioner runs the
	// plan as a dry run, and the page follows it live.
	mustOK(t, admin.GetByTestId("progress").WaitFor(), "see the provisioning panel")
	mustOK(t, admin.Locator(`[data-testid="job-state"]:text("succeeded")`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(20000)}), "see the dry run finish")
	settled(t, admin, "the page settles after the dry run")
	screenshot(t, admin, "13-approved")
	if got := text(t, admin, "dry-run"); !strings.Contains(got, "Dry run") {
		t.Errorf("dry-run notice = %q", got)
	}
	if n := count(t, admin.Locator(`[data-testid="job-steps"] tr.step-done`), "finished steps"); n < 10 {
		t.Errorf("only %d plan steps done", n)
	}
	screenshot(t, admin, "13b-dry-run-progress")

	_, err = owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "connection-state"); got != "Approved" {
		t.Errorf("owner sees state %q", got)
	}
	if got := text(t, owner, "decisions"); !strings.Contains(got, "Fits the cluster") {
		t.Errorf("owner sees decisions %q", got)
	}
	if got := text(t, owner, "access-namespace"); got != "hyperpod-ns-red" {
		t.Errorf("owner sees namespace %q", got)
	}
	if got := text(t, owner, "access-queue"); got != "hyperpod-ns-red-localqueue" {
		t.Errorf("owner sees queue %q", got)
	}
	if n := count(t, owner.GetByTestId("snippet"), "snippets"); n < 3 {
		t.Errorf("owner sees %d command snippets, want 3", n)
	}
	screenshot(t, owner, "14-owner-sees-approval")

	// Team blue files a request; owner.red cannot open it by URL.
	blue := signIn(t, b, p, "Bianca Owner (Blue)")
	_, err = blue.Goto(p.URL + "/teams/blue/connections/new?example=1")
	mustOK(t, err, "blue opens the form")
	mustOK(t, blue.Locator("#namespaces").Fill("hyperpod-ns-blue"), "blue namespace")
	clickTo(t, blue, blue.GetByTestId("save-draft"), "**/connections/2", "blue saves a draft")
	resp, err := owner.Goto(p.URL + "/connections/2")
	mustOK(t, err, "owner.red opens blue's request")
	if resp.Status() != 404 {
		t.Errorf("owner.red opening blue's request = %d, want 404", resp.Status())
	}

	// A crafted approval POST from owner.red's session, with a valid CSRF
	// token, is refused and changes nothing.
	_, err = owner.Goto(p.URL + "/connections/1")
	mustOK(t, err, "owner back on request 1")
	token, err := owner.Locator(`input[name="_csrf"]`).First().InputValue()
	mustOK(t, err, "read the CSRF token")
	r, err := owner.Request().Post(p.URL+"/connections/1/decide", playwright.APIRequestContextPostOptions{
		Form:         map[string]any{"_csrf": token, "decision": "approve", "reason": "self", "version": "2"},
		MaxRedirects: playwright.Int(0),
	})
	mustOK(t, err, "crafted POST")
	if r.Status() != 403 {
		t.Errorf("owner.red's crafted approval = %d, want 403", r.Status())
	}
}
