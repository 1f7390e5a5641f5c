package e2e

import (
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/testenv"
)

// TestApprovalProvisionsOnTheCluster runs the portal against the test bed's
// real kube-apiserver: the admin approves in the browser and watches the
// provisioning steps reach active; the owner then sees the namespace, the
// queue and ready-to-paste commands.
func TestApprovalProvisionsOnTheCluster(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	b := browser(t)
	p := startPortal(t, "--kubeconfig", kubeconfig)

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	_, err := owner.Goto(p.URL + "/teams/red/connections/new?example=1")
	mustOK(t, err, "open the form with the example")
	mustOK(t, owner.GetByTestId("save-submit").Click(), "save and submit")
	mustOK(t, owner.WaitForURL("**/connections/1"), "reach the request")

	admin := signIn(t, b, p, "Ada Admin")
	_, err = admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens the request")
	// Compared with the live cluster: everything of the team is new.
	if got := text(t, admin, "plan-summary"); !strings.Contains(got, "create · Namespace hyperpod-ns-red") ||
		!strings.Contains(got, "create · RoleBinding hyperpod-ns-red/team-viewers") {
		t.Errorf("plan = %q", got)
	}
	if n, _ := admin.GetByText("dry-run mode").Count(); n != 0 {
		t.Error("with a cluster configured the plan must not say dry run")
	}
	mustOK(t, admin.Locator("#reason").Fill("Fits; provision it."), "give a reason")
	mustOK(t, admin.GetByTestId("approve").Click(), "approve")
	mustOK(t, admin.GetByTestId("progress").WaitFor(), "see the provisioning panel")
	// The panel refreshes itself; when the job finishes the page reloads.
	mustOK(t, admin.Locator(`[data-testid="connection-state"]:text("Active")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch the connection become active")
	if got := text(t, admin, "job-state"); got != "succeeded" {
		t.Errorf("job state = %q", got)
	}
	if n, _ := admin.Locator(`[data-testid="job-steps"] tr.step-done`).Count(); n < 10 {
		t.Errorf("only %d steps done", n)
	}
	if n, _ := admin.GetByTestId("dry-run").Count(); n != 0 {
		t.Error("a real provisioning run is labelled dry run")
	}
	screenshot(t, admin, "20-provisioned-active")

	_, err = owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "access-namespace"); got != "hyperpod-ns-red" {
		t.Errorf("owner sees namespace %q", got)
	}
	if got := text(t, owner, "access-queue"); got != "hyperpod-ns-red-localqueue" {
		t.Errorf("owner sees queue %q", got)
	}
	if n, _ := owner.GetByTestId("access-not-live").Count(); n != 0 {
		t.Error("an active connection is shown as not live")
	}
	snippets, err := owner.GetByTestId("snippet").AllTextContents()
	mustOK(t, err, "read the snippets")
	if len(snippets) < 3 || !strings.Contains(strings.Join(snippets, "\n"), "kubectl -n hyperpod-ns-red") {
		t.Errorf("snippets = %q", snippets)
	}
	screenshot(t, owner, "21-owner-active")
}
