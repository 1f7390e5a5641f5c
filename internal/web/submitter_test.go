package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Submitting counts toward independence like filing and editing: an admin
// who also owns the team and submitted another owner's draft cannot approve
// it; another admin can.
func TestSubmitterCannotApprove(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	admin := h.signIn("admin")
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	// owner.red saves a draft; ownadmin (admin and owner of red) submits it.
	if resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	ownadmin := h.signIn("ownadmin")
	if resp, body := h.postAs(ownadmin, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit by ownadmin = %d\n%s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateSubmitted {
		t.Fatalf("state = %s, want submitted", conn.State)
	}
	v, _ := h.db.Version(ctx, 1, 1)
	decide := func(s session) (*http.Response, string) {
		return h.postAs(s, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}})
	}
	if resp, _ := decide(ownadmin); resp.StatusCode != http.StatusForbidden {
		t.Errorf("approval by the submitter = %d, want 403", resp.StatusCode)
	}
	if decisions, _ := h.db.Decisions(ctx, 1); len(decisions) != 0 {
		t.Fatalf("the submitter's approval was recorded: %+v", decisions)
	}
	_, page := h.get(ownadmin.c, "/connections/1")
	if strings.Contains(page, `data-testid="decide-form"`) {
		t.Error("the submitter's page shows a decision form")
	}
	if resp, body := decide(admin); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approval by another admin = %d\n%s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateApproved {
		t.Errorf("state = %s, want approved", conn.State)
	}
}
