package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// foreignLive is a cluster on which the plan's namespace exists and was
// created neither by the portal nor by HyperPod (or, with err, one that
// cannot be read).
type foreignLive struct {
	fakeLive
	err error
}

func (f foreignLive) CheckNamespace(_ context.Context, p provision.Plan) (provision.NamespaceCheck, error) {
	if f.err != nil {
		return provision.NamespaceCheck{}, f.err
	}
	return provision.NamespaceCheck{Namespace: p.Namespace, Exists: true, Foreign: true}, nil
}

// submittedRed files and submits red's example contract and gives the
// approving admin and the decide form (without a decision).
func submittedRed(t *testing.T, h *harness) (session, url.Values) {
	t.Helper()
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	if resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit = %d\n%s", resp.StatusCode, body)
	}
	admin := h.signIn("admin")
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	v, err := h.db.Version(t.Context(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return admin, url.Values{"decision": {"approve"}, "reason": {"fits"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}}
}

// TestApprovalOfAForeignNamespaceNeedsAdoption (issue 10 item 14): the
// approval page warns about an existing namespace nobody the portal trusts
// created and offers the explicit adoption; approving without it is
// refused with nothing stored; with it, the approval records the adoption
// and the job carries it.
func TestApprovalOfAForeignNamespaceNeedsAdoption(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.Live = foreignLive{} })
	admin, form := submittedRed(t, h)
	_, page := h.get(admin.c, "/connections/1")
	if !strings.Contains(page, `data-testid="adopt-namespace-box"`) || !strings.Contains(page, "Adopt the existing namespace hyperpod-ns-red") {
		t.Error("the approval page offers no explicit adoption of the existing namespace")
	}
	if _, body := h.get(h.signIn("owner.red").c, "/connections/1"); strings.Contains(body, `adopt-namespace-box`) {
		t.Error("the owner is offered the adoption")
	}

	resp, body := h.postAs(admin, "/connections/1/decide", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "neither the portal nor HyperPod created it") {
		t.Errorf("approval without adoption = %d; want 409 saying why", resp.StatusCode)
	}
	assertNotApproved(t, h)
	// A box naming another namespace is no adoption of this one.
	form.Set("adopt_namespace", "some-other-ns")
	if resp, _ := h.postAs(admin, "/connections/1/decide", form); resp.StatusCode != http.StatusConflict {
		t.Errorf("approval adopting another namespace = %d, want 409", resp.StatusCode)
	}
	assertNotApproved(t, h)

	form.Set("adopt_namespace", "hyperpod-ns-red")
	if resp, body := h.postAs(admin, "/connections/1/decide", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approval with adoption = %d\n%s", resp.StatusCode, body)
	}
	jobs, err := h.db.JobsFor(t.Context(), 1)
	if err != nil || len(jobs) != 1 || jobs[0].AdoptNamespace != "hyperpod-ns-red" {
		t.Errorf("jobs %+v, %v; want one adopting hyperpod-ns-red", jobs, err)
	}
	evs, err := h.db.AuditEvents(t.Context(), store.AuditFilter{ObjectID: 1, Action: "connection.adopt_namespace"}, 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Actor != "admin@example.test" {
		t.Errorf("adoption audit events %+v, %v", evs, err)
	}
}

// A cluster that cannot be read refuses the approval (the namespace could
// not be checked) without storing anything.
func TestApprovalWhenTheNamespaceCannotBeChecked(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.Live = foreignLive{err: errors.New("connection refused")} })
	admin, form := submittedRed(t, h)
	form.Set("adopt_namespace", "hyperpod-ns-red")
	if resp, body := h.postAs(admin, "/connections/1/decide", form); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "could not read namespace hyperpod-ns-red") {
		t.Errorf("approval = %d; want 503 saying the namespace could not be checked", resp.StatusCode)
	}
	assertNotApproved(t, h)
}

func assertNotApproved(t *testing.T, h *harness) {
	t.Helper()
	conn, err := h.db.Connection(t.Context(), 1)
	if err != nil || conn.State != workflow.StateSubmitted {
		t.Errorf("connection %+v, %v; want still submitted", conn, err)
	}
	if ds, err := h.db.Decisions(t.Context(), 1); err != nil || len(ds) != 0 {
		t.Errorf("decisions %+v, %v; want none", ds, err)
	}
	if js, err := h.db.JobsFor(t.Context(), 1); err != nil || len(js) != 0 {
		t.Errorf("jobs %+v, %v; want none", js, err)
	}
}
