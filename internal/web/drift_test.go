package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestDriftIsShownToTheTeamAndAdmins(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	items := []workflow.DriftItem{{Kind: "RoleBinding", Ref: "hyperpod-ns-red/sneaky", What: "extra", Detail: "grants admin to Group team-blue-submitters"}}
	if err := h.db.SaveDrift(context.Background(), 1, workflow.DriftBasis{}, items, "", h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	admin := h.signIn("admin")
	for _, s := range []session{owner, admin, h.signIn("member.red")} {
		_, body := h.get(s.c, "/connections/1")
		if !strings.Contains(body, `data-testid="drift-items"`) || !strings.Contains(body, "hyperpod-ns-red/sneaky extra") {
			t.Error("the connection page does not show the drift")
		}
	}
	_, body := h.get(admin.c, "/admin/drift")
	if !strings.Contains(body, `data-testid="drift-overview"`) || !strings.Contains(body, "team-blue-submitters") {
		t.Error("the admin overview does not list the drift")
	}
	for _, who := range []string{"owner.red", "reviewer", "finance"} {
		if resp, _ := h.get(noRedirect(h.signIn(who).c), "/admin/drift"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s GET /admin/drift = %d, want 403", who, resp.StatusCode)
		}
	}
	if resp, _ := h.get(noRedirect(h.signIn("owner.blue").c), "/connections/1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue sees red's drift: %d", resp.StatusCode)
	}
}

func TestReapplyFromTheDriftPanel(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	// Pretend the connection was provisioned (no cluster in this test).
	if err := h.db.ExecForTest(ctx, `UPDATE connections SET state = 'active', approved_version = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := h.db.SaveDrift(ctx, 1, workflow.DriftBasis{Version: 1}, []workflow.DriftItem{{Kind: "ResourceQuota", Ref: "hyperpod-ns-red/team-quota", What: "changed", Fields: []string{"spec.hard"}}}, "", h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/connections/1")
	if !strings.Contains(body, `data-testid="reapply"`) {
		t.Fatal("the admin has no re-apply button on a drifted connection")
	}
	_, body = h.get(owner.c, "/connections/1")
	if strings.Contains(body, `data-testid="reapply"`) {
		t.Error("the owner gets a re-apply button")
	}
	if resp, _ := h.postAs(owner, "/connections/1/reapply", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner re-apply = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.postAs(h.signIn("owner.blue"), "/connections/1/reapply", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("outsider re-apply = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/connections/1/reapply", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin re-apply = %d", resp.StatusCode)
	}
	jobs, _ := h.db.JobsFor(ctx, 1)
	if len(jobs) != 1 || jobs[0].Kind != workflow.JobReapply || jobs[0].State != workflow.JobQueued {
		t.Errorf("jobs after re-apply = %+v", jobs)
	}
	if resp, body := h.postAs(admin, "/connections/1/reapply", nil); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already") {
		t.Errorf("a second re-apply while one is queued = %d", resp.StatusCode)
	}
}
