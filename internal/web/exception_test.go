package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestExceptionPanel: an admin outside the team grants an exception on the
// connection page; bad input comes back on the form with the input kept
// (never a 500); the team's owner (the contract's exception owner, but of
// the team), its member and an admin who owns the team cannot grant;
// another team's owner gets 404; the CSRF token is required. The
// exception shows with its end on the connection page, the member page
// and the plan; the admin ends it early with a reason, and the sweep's
// revert once its job ran shows as reverted.
func TestExceptionPanel(t *testing.T) {
	h := newHarness(t, false)
	ctx := t.Context()
	owner, member, blue, admin, ownadmin := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("owner.blue"), h.signIn("admin"), h.signIn("ownadmin")
	activeConnection(t, h, owner, admin)
	grant := func(s session, v url.Values) (*http.Response, string) {
		return h.postAs(s, "/connections/1/exceptions", v)
	}
	good := url.Values{"priority_class": {"experiment"}, "days": {"3"}, "reason": {"the board demo needs the GPUs first"}}

	if _, body := h.get(admin.c, "/connections/1"); !strings.Contains(body, `data-testid="exception-grant-form"`) ||
		!strings.Contains(body, `value="experiment"`) || strings.Contains(body, `<option value="inference"`) {
		t.Error("the admin's connection page has no grant form, or offers a class the contract allows")
	}
	for name, s := range map[string]session{"owner.red": owner, "member.red": member} {
		if _, body := h.get(s.c, "/connections/1"); strings.Contains(body, `data-testid="exception-grant-form"`) {
			t.Errorf("%s sees the grant form", name)
		}
	}
	if _, body := h.get(ownadmin.c, "/connections/1"); !strings.Contains(body, `data-testid="exceptions-note"`) || strings.Contains(body, `data-testid="exception-grant-form"`) {
		t.Error("an admin who owns the team is not told why they cannot grant")
	}

	// Refusals of who.
	for name, s := range map[string]session{"owner.red": owner, "member.red": member, "ownadmin": ownadmin} {
		if resp, _ := grant(s, good); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s's grant = %d, want 403", name, resp.StatusCode)
		}
	}
	if resp, _ := grant(blue, good); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another team's owner = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.post(noRedirect(admin.c), "/connections/1/exceptions", good); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without a CSRF token = %d, want 403", resp.StatusCode)
	}

	// Bad input: the form again, the input kept.
	for _, tc := range []struct {
		set, val, testid string
	}{
		{"days", "abc", "error-days"},
		{"days", "15", "error-days"},
		{"days", "0", "error-days"},
		{"reason", "", "error-reason"},
		{"priority_class", "", "error-priority_class"},
		{"priority_class", "inference", "error-priority_class"},
		{"priority_class", "no-such-class", "error-priority_class"},
	} {
		v := url.Values{}
		for k, vs := range good {
			v[k] = vs
		}
		v.Set(tc.set, tc.val)
		resp, body := grant(admin, v)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="`+tc.testid+`"`) {
			t.Errorf("%s=%q: %d, no %s", tc.set, tc.val, resp.StatusCode, tc.testid)
		}
		if tc.set != "reason" && !strings.Contains(body, "the board demo needs the GPUs first") {
			t.Errorf("%s=%q: the reason was not kept", tc.set, tc.val)
		}
	}
	if xs, _ := h.db.Exceptions(ctx, 1); len(xs) != 0 {
		t.Fatalf("refused grants recorded %+v", xs)
	}

	// The grant.
	if resp, _ := grant(admin, good); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("grant = %d", resp.StatusCode)
	}
	xs, err := h.db.Exceptions(ctx, 1)
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions = %+v, %v", xs, err)
	}
	end := fmtWhen(xs[0].End)
	if d := xs[0].End.Sub(xs[0].Start); d != 72*time.Hour {
		t.Errorf("lasts %s, want 3 days", d)
	}
	_, body := h.get(owner.c, "/connections/1")
	if !strings.Contains(body, `data-testid="exception-row"`) || !strings.Contains(body, end) || strings.Contains(body, `data-testid="exception-revoke-form"`) {
		t.Error("the owner's connection page does not show the exception with its end, or offers to end it")
	}
	if !strings.Contains(body, `data-testid="plan-exceptions"`) || !strings.Contains(body, "experiment-priority") {
		t.Error("the plan does not say which value comes from the exception")
	}
	if _, body := h.get(member.c, "/teams/red/submit"); !strings.Contains(body, `data-testid="member-exception"`) || !strings.Contains(body, end) {
		t.Error("the member page does not show the exception with its end")
	}

	// Early revocation: a reason is required; then reverting.
	revoke := func(v url.Values) (*http.Response, string) {
		return h.postAs(admin, "/connections/1/exceptions/revoke", v)
	}
	if resp, body := revoke(url.Values{"exception": {"1"}, "reason": {""}}); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-revoke_reason"`) {
		t.Errorf("revoke without a reason = %d", resp.StatusCode)
	}
	if resp, _ := revoke(url.Values{"exception": {"99"}, "reason": {"x"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("revoke of no such exception = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(owner, "/connections/1/exceptions/revoke", url.Values{"exception": {"1"}, "reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the team owner's revoke = %d, want 403", resp.StatusCode)
	}
	if resp, _ := revoke(url.Values{"exception": {"1"}, "reason": {"demo cancelled"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if resp, _ := revoke(url.Values{"exception": {"1"}, "reason": {"again"}}); resp.StatusCode != http.StatusConflict {
		t.Errorf("second revoke = %d, want 409", resp.StatusCode)
	}
	h.runJob(workflow.JobReapply) // the grant's job
	if _, err := h.db.SweepExceptions(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.runJob(workflow.JobReapply) // the revert's
	if _, err := h.db.SweepExceptions(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, body := h.get(admin.c, "/connections/1"); !strings.Contains(body, `data-state="reverted"`) || !strings.Contains(body, "demo cancelled") {
		t.Error("the ended exception does not show as reverted with why")
	}
	if _, body := h.get(member.c, "/teams/red/submit"); strings.Contains(body, `data-testid="member-exception"`) {
		t.Error("the member page still shows the ended exception")
	}
}

// TestExceptionOwnerOutsideTheTeam: a contract names as its owner of
// exceptions someone outside the team who is neither admin nor reviewer
// (owner.blue). Once it is live, /exceptions lists the connection for them,
// they open its page (the approved contract names them) and grant an
// exception there; another team's owner named nowhere still
// gets 404, and their /exceptions lists nothing. The admin's /exceptions
// shows the exception in effect.
func TestExceptionOwnerOutsideTheTeam(t *testing.T) {
	h := newHarness(t, false)
	owner, decider, admin, member := h.signIn("owner.red"), h.signIn("owner.blue"), h.signIn("admin"), h.signIn("member.red")
	c := workflow.ExampleContract()
	c.ExceptionOwner = "Owner.Blue@example.test"
	approvedConnectionOf(t, h, owner, admin, c)
	h.runJob(workflow.JobProvision)

	resp, body := h.get(decider.c, "/exceptions")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="exceptions-home-row" data-connection="1"`) || !strings.Contains(body, `data-testid="exceptions-home-open"`) {
		t.Fatalf("the exception owner's /exceptions = %d, without connection 1 to open:\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, `data-testid="exceptions-active"`) {
		t.Error("a non-admin sees the cluster's exceptions in effect")
	}
	if resp, body := h.get(decider.c, "/connections/1"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="exception-grant-form"`) {
		t.Fatalf("the exception owner's connection page = %d, grant form shown: %v", resp.StatusCode, strings.Contains(body, `data-testid="exception-grant-form"`))
	}
	good := url.Values{"priority_class": {"experiment"}, "days": {"2"}, "reason": {"a deadline the contract did not foresee"}}
	if resp, _ := h.postAs(decider, "/connections/1/exceptions", good); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the exception owner's grant = %d", resp.StatusCode)
	}
	if xs, err := h.db.Exceptions(t.Context(), 1); err != nil || len(xs) != 1 || xs[0].GrantedBy != "owner.blue@example.test" {
		t.Fatalf("exceptions = %+v, %v; want one granted by owner.blue", xs, err)
	}
	// Named nowhere: still nothing.
	other := h.signIn("finance")
	if resp, _ := h.get(other.c, "/connections/1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("someone the contract does not name = %d, want 404", resp.StatusCode)
	}
	if _, body := h.get(other.c, "/exceptions"); !strings.Contains(body, `data-testid="exceptions-mine-none"`) || strings.Contains(body, `data-connection="1"`) {
		t.Error("someone the contract does not name has connection 1 on /exceptions")
	}
	// The team's own: listed as theirs only if named (owner.red is not any
	// more); the admin sees the exception in effect.
	if _, body := h.get(member.c, "/exceptions"); strings.Contains(body, `data-connection="1"`) {
		t.Error("a member of the team has its connection on /exceptions")
	}
	if _, body := h.get(admin.c, "/exceptions"); !strings.Contains(body, `data-testid="exceptions-active"`) || !strings.Contains(body, "experiment until") {
		t.Error("the admin's /exceptions does not show the exception in effect")
	}
}

// TestRulesExplained: the owner's connection page and the member page say
// what the cluster holds the team to: the roll-out mode's effect, the five
// admission rules with the clauses their refusals name and the contract's
// values (provision.ExplainAdmission, tested there against the
// parameters), and where to ask for a change.
func TestRulesExplained(t *testing.T) {
	h := newHarness(t, false)
	owner, member, admin := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin)
	for name, page := range map[string]struct {
		s    session
		path string
	}{"the owner's connection page": {owner, "/connections/1"}, "the member page": {member, "/teams/red/submit"}} {
		_, body := h.get(page.s.c, page.path)
		if n := strings.Count(body, `data-testid="rule"`); n != 5 {
			t.Errorf("%s lists %d rules, want 5", name, n)
		}
		for _, want := range []string{`data-testid="rules-mode"`, "warn mode", "kueue.x-k8s.io/queue-name: hyperpod-ns-red-localqueue",
			"training-priority", `&#34;Priority classes&#34;`, `href="/connections/1/edit" data-testid="rules-amend"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s does not say %s", name, want)
			}
		}
	}
}
