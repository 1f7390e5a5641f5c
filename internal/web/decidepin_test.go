package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// A decision names the version and the contract hash it decides on, and an
// approval also the plan hash: without them it would apply to whatever is
// current, and the job would run unpinned. It is refused with 400 and
// nothing is recorded.
func TestDecisionMustNameVersionHashAndPlan(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	v, _ := h.db.Version(ctx, 1, 1)
	plan := h.planHash(1, 1)
	if plan == "" {
		t.Fatal("the example contract has no plan")
	}
	full := url.Values{"reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {plan}}
	without := func(decision string, drop ...string) url.Values {
		out := url.Values{"decision": {decision}}
		for k, vs := range full {
			out[k] = vs
		}
		for _, k := range drop {
			delete(out, k)
		}
		return out
	}
	cases := []struct {
		name string
		form url.Values
	}{
		{"approve without anything", without("approve", "version", "hash", "plan_hash")},
		{"approve without version", without("approve", "version")},
		{"approve without hash", without("approve", "hash")},
		{"approve without plan hash", without("approve", "plan_hash")},
		{"reject without version", without("reject", "version")},
		{"reject without hash", without("reject", "hash")},
		{"request changes without version and hash", without("request_changes", "version", "hash")},
	}
	for _, tc := range cases {
		resp, body := h.postAs(admin, "/connections/1/decide", tc.form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "must name the version") {
			t.Errorf("%s = %d, want 400 with the reason", tc.name, resp.StatusCode)
		}
		conn, _ := h.db.Connection(ctx, 1)
		decisions, _ := h.db.Decisions(ctx, 1)
		jobs, _ := h.db.JobsFor(ctx, 1)
		if conn.State != workflow.StateSubmitted || len(decisions) != 0 || len(jobs) != 0 {
			t.Fatalf("%s recorded something: state %s, %d decisions, %d jobs", tc.name, conn.State, len(decisions), len(jobs))
		}
	}
	// The form the detail page shows carries all three.
	_, page := h.get(admin.c, "/connections/1")
	for _, field := range []string{`name="version" value="1"`, `name="hash" value="` + v.Hash + `"`, `name="plan_hash" value="` + plan + `"`} {
		if !strings.Contains(page, field) {
			t.Errorf("decide form lacks %s", field)
		}
	}
	// With all three the approval goes through and the job is pinned.
	if resp, body := h.postAs(admin, "/connections/1/decide", without("approve")); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve = %d\n%s", resp.StatusCode, body)
	}
	jobs, _ := h.db.JobsFor(ctx, 1)
	if len(jobs) != 1 || jobs[0].PlanHash != plan {
		t.Errorf("jobs = %+v, want one pinned to %s", jobs, plan)
	}
}
