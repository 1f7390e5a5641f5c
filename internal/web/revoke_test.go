package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// approvedConnection files, submits and approves connection 1 for team
// red through the pages, as owner.red and admin.
func approvedConnection(t *testing.T, h *harness, owner, admin session) {
	t.Helper()
	approvedConnectionOf(t, h, owner, admin, workflow.ExampleContract())
}

// approvedConnectionOf is approvedConnection with contract c (team red's).
func approvedConnectionOf(t *testing.T, h *harness, owner, admin session, c workflow.Contract) {
	t.Helper()
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create and submit = %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"4"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	v1, err := h.db.Version(t.Context(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"fits"},
		"version": {"1"}, "hash": {v1.Hash}, "plan_hash": {h.planHash(1, 1)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve = %d\n%s", resp.StatusCode, body)
	}
}

func TestRevoke(t *testing.T) {
	h := newHarness(t, false)
	ctx := t.Context()
	owner, member, blue, admin, reviewer, finance := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("owner.blue"),
		h.signIn("admin"), h.signIn("reviewer"), h.signIn("finance")
	revoke := func(s session, reason string) (*http.Response, string) {
		return h.postAs(s, "/connections/1/revoke", url.Values{"reason": {reason}})
	}

	approvedConnection(t, h, owner, admin)
	// A submitted request is not revoked: it is rejected or withdrawn.
	ex := workflow.ExampleContractFor("blue")
	f := formValues(formFromContract(ex))
	f.Set("intent", "submit")
	if resp, _ := h.postAs(blue, "/teams/blue/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("blue's request = %d", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/connections/2/revoke", url.Values{"reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoking a submitted request = %d, want 403", resp.StatusCode)
	}
	if _, body := h.get(admin.c, "/connections/2"); strings.Contains(body, `data-testid="revoke-form"`) {
		t.Error("the revoke form is offered on a submitted request")
	}
	jobsBefore, _ := h.db.JobsFor(ctx, 1)

	_, page := h.get(admin.c, "/connections/1")
	for _, want := range []string{`data-testid="revoke-form"`, `action="/connections/1/revoke"`, "kept and locked"} {
		if !strings.Contains(page, want) {
			t.Errorf("admin's page lacks %q", want)
		}
	}
	if strings.Contains(page, "nothing is removed") {
		t.Error("the revoke form speaks of a dry run with a cluster configured")
	}
	if _, body := h.get(owner.c, "/connections/1"); strings.Contains(body, `data-testid="revoke-form"`) {
		t.Error("the revoke form is offered to the team's owner")
	}

	// Who may: nobody outside the team learns it exists; viewers who are
	// not admins are refused.
	for _, tc := range []struct {
		name string
		who  session
		want int
	}{{"owner.blue", blue, 404}, {"finance", finance, 404}, {"owner.red", owner, 403}, {"member.red", member, 403}, {"reviewer", reviewer, 403}} {
		if resp, _ := revoke(tc.who, "because"); resp.StatusCode != tc.want {
			t.Errorf("%s revoking = %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	// No CSRF token: refused before the handler.
	if resp, _ := h.post(noRedirect(admin.c), "/connections/1/revoke", url.Values{"reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoke without a CSRF token = %d, want 403", resp.StatusCode)
	}
	// A reason is required: the page comes back with the error beside it.
	resp, body := revoke(admin, "   ")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-revoke-reason"`) || !strings.Contains(body, `data-testid="revoke-form"`) {
		t.Errorf("revoke without a reason = %d", resp.StatusCode)
	}
	long := strings.Repeat("x", 2001)
	if resp, body := revoke(admin, long); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, long) {
		t.Errorf("revoke with a long reason = %d, want 422 with the input kept", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 1); c.State != workflow.StateApproved {
		t.Fatalf("state after refused revocations = %s, want approved", c.State)
	}
	if js, _ := h.db.JobsFor(ctx, 1); len(js) != len(jobsBefore) {
		t.Fatalf("refused revocations queued jobs: %+v", js)
	}

	resp, _ = revoke(admin, "project ended early")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/connections/1" {
		t.Fatalf("revoke = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	conn, _ := h.db.Connection(ctx, 1)
	if conn.State != workflow.StateRevoking {
		t.Errorf("state %s, want revoking", conn.State)
	}
	js, _ := h.db.JobsFor(ctx, 1)
	if len(js) != 2 || js[0].Kind != workflow.JobRevoke || js[0].State != workflow.JobQueued || js[1].State != workflow.JobFailed {
		t.Errorf("jobs = %+v, want a queued revoke job and the provisioning job cancelled", js)
	}
	_, page = h.get(owner.c, "/connections/1")
	for _, want := range []string{"Revoking", "connection.revoke", "project ended early", "<h2>Revocation</h2>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the team's page after revocation lacks %q", want)
		}
	}
	if _, body := h.get(admin.c, "/connections/1"); strings.Contains(body, `data-testid="revoke-form"`) {
		t.Error("the revoke form is still offered on a revoking connection")
	}
	if resp, _ := revoke(admin, "again"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoking twice = %d, want 403", resp.StatusCode)
	}
	if n, brk, err := h.db.VerifyAudit(ctx); err != nil || brk != nil {
		t.Errorf("audit chain: %d events, break %+v, %v", n, brk, err)
	}
}

// With OnRevoke delete and no cluster, the form says so, and revoking
// works the same.
func TestRevokeFormSaysWhatHappens(t *testing.T) {
	h := newHarness(t, false, func(o *Options) {
		o.DryRun = true
		o.Cluster.OnRevoke = provision.RevokeDelete
	})
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	approvedConnection(t, h, owner, admin)
	_, page := h.get(admin.c, "/connections/1")
	for _, want := range []string{"deleted, with everything in it", "nothing is removed"} {
		if !strings.Contains(page, want) {
			t.Errorf("admin's page lacks %q", want)
		}
	}
	if resp, _ := h.postAs(admin, "/connections/1/revoke", url.Values{"reason": {"done"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("revoke = %d", resp.StatusCode)
	}
}
