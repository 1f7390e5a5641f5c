package web

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// fieldError is the text of a form field's error, "" when it has none.
func fieldError(body, field string) string {
	m := regexp.MustCompile(`data-testid="error-` + regexp.QuoteMeta(field) + `">([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// squatter is team red's contract naming team blue's project role.
func squatter() workflow.Contract {
	c := workflow.ExampleContract()
	c.ProjectRoleARN = workflow.ExampleContractFor("blue").ProjectRoleARN
	return c
}

// TestDraftDoesNotSquatAnotherTeamsRole (issue 10 item 3): owner.red saves
// an incomplete draft naming role/blue-project; owner.blue still submits
// its request, because a draft holds no claim (nobody could clear it).
func TestDraftDoesNotSquatAnotherTeamsRole(t *testing.T) {
	h := newHarness(t, false)
	red := squatter()
	red.BusinessPurpose = "" // incomplete: saved as a draft only
	if resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", formValues(formFromContract(red))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("red's draft = %d\n%s", resp.StatusCode, body)
	}
	f := formValues(formFromContract(workflow.ExampleContractFor("blue")))
	f.Set("intent", "submit")
	if resp, body := h.postAs(h.signIn("owner.blue"), "/teams/blue/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("blue's submission after red's draft = %d: %q", resp.StatusCode, fieldError(body, "project_role_arn"))
	}
	if conn, err := h.db.Connection(t.Context(), 2); err != nil || conn.State != workflow.StateSubmitted {
		t.Errorf("blue's request: %+v, %v; want submitted", conn, err)
	}
}

// TestSubmittedRequestHoldsItsClaimsWithoutNamingTheTeam: once red has
// submitted a request naming role/blue-project, blue's submission is
// refused on the field, with the input kept, nothing stored, and a message
// that says nothing about who holds the role.
func TestSubmittedRequestHoldsItsClaimsWithoutNamingTheTeam(t *testing.T) {
	h := newHarness(t, false)
	f := formValues(formFromContract(squatter()))
	f.Set("intent", "submit")
	if resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("red's submission = %d\n%s", resp.StatusCode, body)
	}
	blue := workflow.ExampleContractFor("blue")
	f = formValues(formFromContract(blue))
	f.Set("intent", "submit")
	resp, body := h.postAs(h.signIn("owner.blue"), "/teams/blue/connections", f)
	msg := fieldError(body, "project_role_arn")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg, "is not available") {
		t.Fatalf("blue's submission = %d, project role error %q; want 422 and the role not available", resp.StatusCode, msg)
	}
	for _, leak := range []string{"red", "another connection", "#1", "connection 1", "claimed"} {
		if strings.Contains(strings.ToLower(msg), leak) {
			t.Errorf("the refusal %q tells blue %q", msg, leak)
		}
	}
	if page := html.UnescapeString(body); !strings.Contains(page, blue.ProjectRoleARN) || !strings.Contains(page, blue.BusinessPurpose) {
		t.Error("blue's input was not kept")
	}
	if _, err := h.db.Connection(t.Context(), 2); err == nil {
		t.Error("the refused submission stored a connection")
	}
	// A draft of the same still saves: drafts are unchecked scratch.
	if resp, _ := h.postAs(h.signIn("owner.blue"), "/teams/blue/connections", formValues(formFromContract(blue))); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("blue's draft = %d", resp.StatusCode)
	}
}

// The cluster settings' reserved_namespaces reach the form: a namespace
// on that list is refused like a built-in system namespace, with the
// input kept (issue 10 item 14).
func TestSettingsReservedNamespacesAreRefusedOnTheForm(t *testing.T) {
	h := newHarness(t, false, func(o *Options) {
		o.Cluster.ClusterQueueManagedByPortal = true
		o.Cluster.ReservedNamespaces = []string{"team-infra", "platform-*"}
	})
	owner := h.signIn("owner.red")
	for _, ns := range []string{"team-infra", "platform-ingress", "kueue-system", "cert-manager"} {
		c := workflow.ExampleContract()
		c.Namespaces = []string{ns}
		f := formValues(formFromContract(c))
		f.Set("intent", "submit")
		resp, body := h.postAs(owner, "/teams/red/connections", f)
		if msg := fieldError(body, "namespaces"); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg, "reserved for the cluster's own components") {
			t.Errorf("namespace %s = %d, %q; want 422 and reserved", ns, resp.StatusCode, msg)
		}
	}
	c := workflow.ExampleContract()
	c.Namespaces = []string{"red-batch"}
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a team namespace = %d: %q", resp.StatusCode, fieldError(body, "namespaces"))
	}
}
