package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestDriftIsShownToTheTeamAndAdmins(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	items := []store.DriftRecord{{Kind: "RoleBinding", Ref: "hyperpod-ns-red/sneaky", What: "extra", Detail: "grants admin to Group team-blue-submitters"}}
	if err := h.db.SaveDrift(context.Background(), 1, items, "", h.srv.opts.Now()); err != nil {
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
