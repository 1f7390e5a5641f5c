package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// activeConnection files, approves and provisions connection 1 for team
// red: the approval's job runs through the store's job path (no cluster in
// these tests), so the connection is active on version 1.
func activeConnection(t *testing.T, h *harness, owner, admin session) {
	t.Helper()
	approvedConnection(t, h, owner, admin)
	h.runJob(workflow.JobProvision)
	if c, err := h.db.Connection(t.Context(), 1); err != nil || c.State != workflow.StateActive {
		t.Fatalf("connection after its job = %+v, %v; want active", c, err)
	}
}

// runJob claims the next job, which must be of kind, and runs it to the
// end through the store, as a worker with one step would.
func (h *harness) runJob(kind workflow.JobKind) workflow.Job {
	h.t.Helper()
	ctx := h.t.Context()
	now := h.srv.opts.Now()
	j, ok, err := h.db.ClaimJob(ctx, "test-worker", now, time.Minute)
	if err != nil || !ok || j.Kind != kind {
		h.t.Fatalf("ClaimJob = %+v, %v, %v; want a %s job", j, ok, err, kind)
	}
	if err := h.db.StartJob(ctx, j.ID, "test-worker", j.PlanHash, []string{"apply"}, false, now); err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.StepStarted(ctx, j.ID, "test-worker", 0, "apply", now); err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.StepFinished(ctx, j.ID, "test-worker", 0, "apply", "configured", "", now); err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.CompleteJob(ctx, j.ID, "test-worker", now); err != nil {
		h.t.Fatal(err)
	}
	return j
}

// changeForm is the example contract with a change applied, as the form
// posts it on top of base.
func changeForm(base int, change func(*workflow.Contract)) url.Values {
	c := workflow.ExampleContract()
	change(&c)
	f := formValues(formFromContract(c))
	f.Set("base_version", strconv.Itoa(base))
	return f
}

func TestAmendmentThroughThePages(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin)
	ctx := t.Context()

	_, body := h.get(owner.c, "/connections/1")
	if !strings.Contains(body, `data-testid="edit">Request a change</a>`) {
		t.Fatalf("the owner of an active connection is not offered a change:\n%s", section(body, "connection-state"))
	}
	_, body = h.get(owner.c, "/connections/1/edit")
	if !strings.Contains(body, "Request a change to connection #1 (active on version 1)") || !strings.Contains(body, "ml.p5.48xlarge 2") {
		t.Fatal("the change form does not start from the approved version")
	}

	// A change may not move the namespaces: refused on the form, input
	// kept, nothing saved.
	moved := changeForm(1, func(c *workflow.Contract) { c.Namespaces = []string{"hyperpod-ns-elsewhere"} })
	resp, body := h.postAs(owner, "/connections/1", moved)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-namespaces"`) || !strings.Contains(body, "hyperpod-ns-elsewhere") {
		t.Errorf("moving the namespace = %d; want 422 with the error on the namespaces and the input kept", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 1); c.CurrentVersion != 1 || c.Amendment != workflow.AmendNone {
		t.Fatalf("a refused change was saved: %+v", c)
	}

	// Raise the guarantee from 2 to 3 instances: a draft change, the
	// connection stays active on version 1.
	more := changeForm(1, func(c *workflow.Contract) {
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 3}}
	})
	if resp, body := h.postAs(owner, "/connections/1", more); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the change = %d\n%s", resp.StatusCode, body)
	}
	c, err := h.db.Connection(ctx, 1)
	if err != nil || c.State != workflow.StateActive || c.ApprovedVersion != 1 || c.CurrentVersion != 2 || c.Amendment != workflow.AmendDraft {
		t.Fatalf("after saving a change: %+v, %v; want active on 1 with a draft change 2", c, err)
	}
	_, body = h.get(owner.c, "/connections/1")
	if !strings.Contains(body, `data-testid="amendment">change v2 draft</span>`) || !strings.Contains(body, `data-testid="active-version">on version 1</span>`) {
		t.Errorf("the page does not say 'active on v1 · change v2 draft':\n%s", section(body, "connection-state"))
	}
	_, list := h.get(owner.c, "/teams/red")
	if !strings.Contains(list, "Active · change v2 draft") {
		t.Error("the team's list does not show the open change")
	}

	if resp, body := h.postAs(owner, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submitting the change = %d\n%s", resp.StatusCode, body)
	}
	_, body = h.get(admin.c, "/admin")
	if !strings.Contains(body, `href="/connections/1"`) {
		t.Error("the admin queue does not list the submitted change")
	}
	_, body = h.get(admin.c, "/connections/1")
	decide := section(body, "decide")
	if !strings.Contains(body, "What this change does to the active version 1") || !strings.Contains(decide, "Active version 1") ||
		!strings.Contains(decide, "Approve the change (version 2)") {
		t.Errorf("the admin does not see the change's diff against the active version, its capacity and its approval:\n%s", decide)
	}

	// The plan diff: the quota grows in place, nothing is created or
	// deleted.
	diff := section(body, "plan-diff")
	if !strings.Contains(diff, "ResourceQuota hyperpod-ns-red/") || !strings.Contains(diff, ">update<") || strings.Contains(diff, ">delete<") || strings.Contains(diff, ">create<") {
		t.Errorf("the plan diff does not show the quota update alone:\n%s", diff)
	}
	// Nobody else decides on it.
	for _, who := range []string{"member.red", "owner.blue", "reviewer", "finance"} {
		s := h.signIn(who)
		resp, _ := h.postAs(s, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"2"},
			"hash": {"x"}, "plan_hash": {h.planHash(1, 2)}})
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s approving the change = %d, want 403 or 404", who, resp.StatusCode)
		}
	}
	v2, err := h.db.Version(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"room for it"},
		"version": {"2"}, "hash": {v2.Hash}, "plan_hash": {h.planHash(1, 2)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approving the change = %d\n%s", resp.StatusCode, body)
	}
	c, _ = h.db.Connection(ctx, 1)
	if c.State != workflow.StateActive || c.ApprovedVersion != 1 || c.Amendment != workflow.AmendApproved {
		t.Fatalf("after the approval: %+v; want still active on 1 with the change approved", c)
	}
	j := h.runJob(workflow.JobAmend)
	if j.Version != 2 || j.FromVersion != 1 || j.PlanHash != h.planHash(1, 2) {
		t.Errorf("amend job = %+v; want version 2 from 1 pinned to the plan", j)
	}
	c, _ = h.db.Connection(ctx, 1)
	if c.State != workflow.StateActive || c.ApprovedVersion != 2 || c.Amendment != workflow.AmendNone {
		t.Fatalf("after the job: %+v; want active on version 2", c)
	}
	_, body = h.get(owner.c, "/connections/1")
	if !strings.Contains(body, `data-testid="active-version">· approved version 2</span>`) || strings.Contains(body, `data-testid="amendment"`) {
		t.Errorf("the page does not show version 2 active:\n%s", section(body, "connection-state"))
	}
}

// Rejecting, sending back or withdrawing a change leaves the active
// version as it is.
func TestAmendmentRefusalsKeepTheActiveVersion(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin)
	ctx := t.Context()
	version := 1
	change := func(end string) {
		t.Helper()
		c, _ := h.db.Connection(ctx, 1)
		f := changeForm(c.CurrentVersion, func(c *workflow.Contract) { c.EndDate = end })
		f.Set("intent", "submit")
		if resp, body := h.postAs(owner, "/connections/1", f); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("change and submit = %d\n%s", resp.StatusCode, body)
		}
		version++
	}
	decide := func(decision string) {
		t.Helper()
		v, err := h.db.Version(ctx, 1, version)
		if err != nil {
			t.Fatal(err)
		}
		if resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {decision}, "reason": {"not now"},
			"version": {strconv.Itoa(version)}, "hash": {v.Hash}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s = %d\n%s", decision, resp.StatusCode, body)
		}
	}
	check := func(what string, want workflow.Amendment) {
		t.Helper()
		c, _ := h.db.Connection(ctx, 1)
		if c.State != workflow.StateActive || c.ApprovedVersion != 1 || c.Amendment != want {
			t.Errorf("after %s: %+v; want active on 1, change %q", what, c, want)
		}
		if js, _ := h.db.JobsFor(ctx, 1); len(js) != 1 {
			t.Errorf("after %s: %d jobs, want only the provisioning one", what, len(js))
		}
	}
	change("2031-01-01")
	decide("reject")
	check("a rejection", workflow.AmendNone)
	change("2031-02-01")
	decide("request_changes")
	check("a change request", workflow.AmendChangesRequested)
	if resp, _ := h.postAs(owner, "/connections/1/withdraw", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("withdraw = %d", resp.StatusCode)
	}
	check("a withdrawal", workflow.AmendNone)
	_, body := h.get(owner.c, "/connections/1")
	if !strings.Contains(body, "Contract (version 1)") || !strings.Contains(body, `data-testid="edit">Request a change</a>`) {
		t.Error("after a withdrawn change the page does not show the active version 1 and a new change")
	}
}

// The capacity rule of a change: an increase must fit, a decrease always
// fits (even on a cluster that is over-committed).
func TestAmendmentCapacity(t *testing.T) {
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin) // holds 2 of the 4 p5
	ctx := t.Context()
	submitChange := func(n int) int {
		t.Helper()
		c, _ := h.db.Connection(ctx, 1)
		f := changeForm(c.CurrentVersion, func(c *workflow.Contract) {
			c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: n}}
		})
		f.Set("intent", "submit")
		if resp, body := h.postAs(owner, "/connections/1", f); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("change to %d = %d\n%s", n, resp.StatusCode, body)
		}
		return c.CurrentVersion + 1
	}
	approve := func(v int) int {
		t.Helper()
		ver, err := h.db.Version(ctx, 1, v)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"},
			"version": {strconv.Itoa(v)}, "hash": {ver.Hash}, "plan_hash": {h.planHash(1, v)}})
		return resp.StatusCode
	}
	v := submitChange(5) // 5 > 4: does not fit
	if code := approve(v); code != http.StatusConflict {
		t.Errorf("approving an increase past the cluster = %d, want 409", code)
	}
	if c, _ := h.db.Connection(ctx, 1); c.Amendment != workflow.AmendSubmitted || c.ApprovedVersion != 1 {
		t.Errorf("a refused change moved the connection: %+v", c)
	}
	if resp, _ := h.postAs(owner, "/connections/1/withdraw", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("withdraw = %d", resp.StatusCode)
	}
	// The cluster shrinks below what is committed: a decrease still fits.
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"1"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	v = submitChange(1)
	if code := approve(v); code != http.StatusSeeOther {
		t.Errorf("approving a decrease on an over-committed cluster = %d, want 303", code)
	}
}
