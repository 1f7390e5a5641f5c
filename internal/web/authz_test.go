package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// statementMonth is the month the route walks ask statements for: a past
// month, never closed in the tests, so computed on each read.
const statementMonth = "2026-01"

// financeReadsTeam: the team routes finance reads for every team although it
// is no member of any: a team's usage (chargeback; workflow.ActionViewUsage)
// and its statements (workflow.ActionViewCosts). Finance is an outsider to
// every other team route. The walks below require 200 here. The daily
// summary (/teams/:team/usage/summary and its CSV) is authorized as the
// usage page.
func financeReadsTeam(method, path string) bool {
	path = strings.TrimPrefix(path, apiPrefix) // the API's usage and statements are the pages'
	return method == http.MethodGet && (path == "/teams/:team/usage" || strings.HasPrefix(path, "/teams/:team/usage/summary") ||
		path == "/teams/:team/statements" || strings.HasPrefix(path, "/teams/:team/statements/"))
}

// TestEveryRouteHidesTheOtherTeam walks the whole route table: every route
// that takes a team or a connection, requested by users outside team red
// for red's objects, answers 404 and changes nothing. A new route is
// covered automatically.
func TestEveryRouteHidesTheOtherTeam(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	}
	ctx := context.Background()
	// Connection 1 is active with review 1 open, so that the review routes
	// (/reviews/:id) name a review of team red.
	if err := h.db.ExecForTest(ctx, `UPDATE connections SET state = 'active', approved_version = 1, submitted_at = created_at WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.OpenReview(ctx, 1, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled}, h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	before, _ := h.db.Connection(ctx, 1)
	outsiders := map[string]session{"owner.blue": h.signIn("owner.blue"), "finance": h.signIn("finance")}
	params := strings.NewReplacer(":team", "red", ":id", "1", ":v", "1", ":format", "contract.json", ":month", statementMonth)
	checked := 0
	for _, r := range h.srv.echo.Routes() {
		if !strings.Contains(r.Path, ":team") && !strings.Contains(r.Path, ":id") {
			continue
		}
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			continue
		}
		path := params.Replace(r.Path)
		for name, s := range outsiders {
			var resp *http.Response
			var body string
			if r.Method == http.MethodGet {
				resp, body = h.get(noRedirect(s.c), path)
			} else {
				resp, body = h.postAs(s, path, url.Values{"decision": {"approve"}, "reason": {"x"}, "intent": {"submit"}})
				if strings.HasPrefix(r.Path, "/reviews/") {
					// A valid review decision: refused as not found, not as invalid.
					resp, body = h.postAs(s, path, url.Values{"decision": {"renew"}, "reason": {"x"}})
				}
			}
			if isAPIPath(r.Path) && r.Method != http.MethodGet {
				// The browser's session never writes through the API
				// (api.go); tokens walk it in TestAPIRouteWalkHidesTheOtherTeam.
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s %s = %d, want 403 (no writes through the API with a session)", name, r.Method, path, resp.StatusCode)
				}
			} else if name == "finance" && financeReadsTeam(r.Method, r.Path) {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s %s %s = %d, want 200 (finance reads every team's usage and costs)", name, r.Method, path, resp.StatusCode)
				}
			} else if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s %s = %d, want 404", name, r.Method, path, resp.StatusCode)
			}
			if strings.Contains(body, "hyperpod-ns-red") || strings.Contains(body, "owner.red@example.test") {
				t.Errorf("%s %s %s leaks team red's contract", name, r.Method, path)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d route×user checks ran; the route table changed?", checked)
	}
	after, _ := h.db.Connection(ctx, 1)
	if after.State != before.State || after.CurrentVersion != before.CurrentVersion {
		t.Errorf("outsiders changed the connection: %+v -> %+v", before, after)
	}
}

// TestEveryAdminRouteRefusesNonAdmins walks the route table's /admin
// routes: each answers 403 to every signed-in non-admin (GET and POST, a
// POST with a valid CSRF token), and admins get every page. A new admin
// route is covered automatically.
func TestEveryAdminRouteRefusesNonAdmins(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck, o.ClusterCanRefresh = &fakeCluster{}, true })
	ctx := context.Background()
	users := map[string]session{}
	for _, u := range []string{"owner.red", "member.red", "reviewer", "finance"} {
		users[u] = h.signIn(u)
	}
	admin := h.signIn("admin")
	before, _ := h.db.AuditEvents(ctx, store.AuditFilter{}, 0, 1000)
	checked := 0
	for _, r := range h.srv.echo.Routes() {
		if r.Path != "/admin" && !strings.HasPrefix(r.Path, "/admin/") {
			continue
		}
		for name, s := range users {
			var resp *http.Response
			switch r.Method {
			case http.MethodGet:
				resp, _ = h.get(noRedirect(s.c), r.Path)
			case http.MethodPost:
				resp, _ = h.postAs(s, r.Path, url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
			default:
				continue
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s %s = %d, want 403", name, r.Method, r.Path, resp.StatusCode)
			}
			checked++
		}
		if r.Method == http.MethodGet {
			if resp, _ := h.get(noRedirect(admin.c), r.Path); resp.StatusCode != http.StatusOK {
				t.Errorf("admin GET %s = %d, want 200", r.Path, resp.StatusCode)
			}
		}
	}
	if checked < 4*7 {
		t.Errorf("only %d route×user checks ran; the route table changed?", checked)
	}
	after, _ := h.db.AuditEvents(ctx, store.AuditFilter{}, 0, 1000)
	if len(after) != len(before) {
		t.Errorf("non-admins' requests wrote %d audit events", len(after)-len(before))
	}
}

func TestNoSelfApprovalAndTwoAdminsForRestricted(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	if resp, _ := h.postAs(h.signIn("admin"), "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode != 200 {
		t.Fatalf("inventory = %d", resp.StatusCode)
	}
	// An admin who also owns team red files a restricted-data request.
	ownadmin := h.signIn("ownadmin")
	c := workflow.ExampleContract()
	c.DataClassification = workflow.DataRestricted
	c.EndDate = "2099-01-01"
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	if resp, body := h.postAs(ownadmin, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	v, _ := h.db.Version(ctx, 1, 1)
	decide := func(s session) (*http.Response, string) {
		return h.postAs(s, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}})
	}
	// The filer, although an admin, cannot approve; the page says why.
	if resp, _ := decide(ownadmin); resp.StatusCode != http.StatusForbidden {
		t.Errorf("self-approval = %d, want 403", resp.StatusCode)
	}
	_, page := h.get(ownadmin.c, "/connections/1")
	if !strings.Contains(page, `data-testid="decide-note"`) || strings.Contains(page, `data-testid="decide-form"`) {
		t.Error("the filer's page should explain why they cannot decide, without a decision form")
	}
	// Restricted: the first admin's approval is recorded, the state stays.
	admin := h.signIn("admin")
	if resp, _ := decide(admin); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first approval = %d", resp.StatusCode)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateSubmitted {
		t.Errorf("after one of two approvals: %s", conn.State)
	}
	_, page = h.get(admin.c, "/connections/1")
	if !strings.Contains(page, "1 of 2 admin approvals") {
		t.Error("the page does not show 1 of 2 approvals")
	}
	// The same admin again: refused.
	if resp, _ := decide(admin); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusConflict {
		t.Errorf("same admin approving twice = %d", resp.StatusCode)
	}
	// A second, distinct admin completes it.
	if resp, _ := decide(h.signIn("admin2")); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("second approval = %d", resp.StatusCode)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateApproved {
		t.Errorf("after two approvals: %s", conn.State)
	}
}

func TestAuditPageAndExports(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	h.postAs(owner, "/connections/1/submit", nil)
	for user, want := range map[string]int{"admin": 200, "reviewer": 200, "owner.red": 403, "member.red": 403, "finance": 403} {
		s := h.signIn(user)
		resp, body := h.get(noRedirect(s.c), "/audit?team=red")
		if resp.StatusCode != want {
			t.Errorf("%s GET /audit = %d, want %d", user, resp.StatusCode, want)
		}
		if want == 200 && (!strings.Contains(body, "connection.submit") || !strings.Contains(body, `data-testid="chain-ok"`)) {
			t.Errorf("%s: the audit page lacks the submit event or the chain status", user)
		}
	}
	rev := h.signIn("reviewer")
	resp, csvBody := h.get(rev.c, "/audit?format=csv&team=red")
	if resp.StatusCode != 200 || !strings.HasPrefix(csvBody, "id,at,actor,action") || !strings.Contains(csvBody, "connection.create") {
		t.Errorf("CSV export = %d\n%s", resp.StatusCode, csvBody)
	}
	resp, jsonBody := h.get(rev.c, "/audit?format=json&action=connection.submit")
	if resp.StatusCode != 200 || !strings.Contains(jsonBody, `"action": "connection.submit"`) || strings.Contains(jsonBody, "connection.create") {
		t.Errorf("JSON export with an action filter = %d\n%s", resp.StatusCode, jsonBody)
	}
	if got := csvSafe("=HYPERLINK(1)"); got != "'=HYPERLINK(1)" {
		t.Errorf("csvSafe = %q", got)
	}
}

func TestCompareAnyTwoVersions(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	for i, w := range []string{"10", "20"} {
		v := formFromContract(workflow.ExampleContract())
		v.Set("fair_share_weight", w)
		f := formValues(v)
		f.Set("base_version", itoa0(i+1))
		if resp, _ := h.postAs(owner, "/connections/1", f); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("save version %d = %d", i+2, resp.StatusCode)
		}
	}
	_, body := h.get(owner.c, "/connections/1/diff?from=1&to=3")
	if !strings.Contains(body, "Fair-share weight") || !strings.Contains(body, ">50<") || !strings.Contains(body, ">20<") {
		t.Errorf("diff 1→3 does not show the weight change:\n%s", body)
	}
	_, body = h.get(owner.c, "/connections/1/diff?from=2&to=2")
	if !strings.Contains(body, `data-testid="no-changes"`) {
		t.Error("a version compared with itself should have no changes")
	}
	if resp, _ := h.get(owner.c, "/connections/1/diff?from=1&to=9"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("diff to a missing version = %d", resp.StatusCode)
	}
}

func TestOwnersMustBePortalUsers(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	v := formFromContract(workflow.ExampleContract())
	v.Set("cost_owner", "ghost@example.test")
	f := formValues(v)
	f.Set("intent", "submit")
	resp, body := h.postAs(owner, "/teams/red/connections", f)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-cost_owner"`) || !strings.Contains(body, "ghost@example.test") {
		t.Errorf("unknown cost owner = %d", resp.StatusCode)
	}
}

func TestApprovalPageShowsTheProvisioningPlan(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.DryRun = true })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	for _, s := range []session{h.signIn("admin"), owner} {
		_, body := h.get(s.c, "/connections/1")
		for _, want := range []string{`data-testid="plan-summary"`, "Namespace hyperpod-ns-red", "ResourceQuota hyperpod-ns-red/", "RoleBinding", "dry-run mode", `data-testid="plan-warnings"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the plan on the request page lacks %q", want)
			}
		}
	}
	// Members and outsiders do not get the plan.
	_, body := h.get(h.signIn("member.red").c, "/connections/1")
	if strings.Contains(body, `data-testid="plan"`) {
		t.Error("a team member sees the provisioning plan")
	}
}

type fakeLive struct{ items []workflow.DriftItem }

func (f fakeLive) Drift(context.Context, provision.Plan) ([]workflow.DriftItem, error) {
	return f.items, nil
}

func (f fakeLive) CheckNamespace(_ context.Context, p provision.Plan) (provision.NamespaceCheck, error) {
	return provision.NamespaceCheck{Namespace: p.Namespace}, nil
}

func TestPlanIsComparedWithTheCluster(t *testing.T) {
	live := fakeLive{items: []workflow.DriftItem{
		{Kind: "Namespace", Ref: "hyperpod-ns-red", What: "deleted"},
		{Kind: "ResourceQuota", Ref: "hyperpod-ns-red/team-quota", What: "changed", Fields: []string{"spec.hard"}},
		{Kind: "RoleBinding", Ref: "hyperpod-ns-red/old", What: "extra", Detail: "grants admin to Group x"},
	}}
	h := newHarness(t, false, func(o *Options) { o.Live = live })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, body := h.get(h.signIn("admin").c, "/connections/1")
	// HyperPod makes the team namespace (HyperPod-managed mode); the portal
	// creates the rest.
	for _, want := range []string{"made by HyperPod · Namespace hyperpod-ns-red", "update spec.hard · ResourceQuota", "unchanged · LimitRange", "RoleBinding hyperpod-ns-red/old (grants admin to Group x)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan lacks %q", want)
		}
	}
}

// TestSignedInResponsesAreNotStored walks the route table as signed-in
// users (an owner and an admin): every GET answer, whatever its status,
// and the exports carry Cache-Control: no-store, so neither the browser
// nor a proxy keeps team data. Only the static assets are cacheable. A new
// route is covered automatically.
func TestSignedInResponsesAreNotStored(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck, o.ClusterCanRefresh = &fakeCluster{}, true })
	owner := h.signIn("owner.red")
	if resp, _ := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d", resp.StatusCode)
	} else if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("POST /teams/red/connections: Cache-Control %q, want no-store", cc)
	}
	users := map[string]session{"owner.red": owner, "admin": h.signIn("admin")}
	params := strings.NewReplacer(":team", "red", ":id", "1", ":v", "1", ":month", statementMonth)
	var paths []string
	for _, r := range h.srv.echo.Routes() {
		if r.Method != http.MethodGet || strings.HasPrefix(r.Path, "/static/") || strings.HasPrefix(r.Path, "/dev-idp") {
			continue
		}
		if strings.Contains(r.Path, ":format") {
			for _, f := range []string{"contract.json", "contract.yaml", "plan.json"} {
				paths = append(paths, params.Replace(strings.Replace(r.Path, ":format", f, 1)))
			}
			continue
		}
		paths = append(paths, params.Replace(r.Path))
	}
	paths = append(paths, "/audit?format=csv", "/audit?format=json", "/connections/1/diff?a=1&b=1", "/no-such-page")
	checked := 0
	for name, s := range users {
		for _, p := range paths {
			resp, _ := h.get(noRedirect(s.c), p)
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("%s GET %s (%d): Cache-Control %q, want no-store", name, p, resp.StatusCode, cc)
			}
			checked++
		}
	}
	if checked < 2*25 {
		t.Errorf("only %d route×user checks ran; the route table changed?", checked)
	}
	// Static assets stay cacheable.
	resp, _ := h.get(h.client(), "/static/app.css")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age") {
		t.Errorf("GET /static/app.css = %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}

// TestAuditUnknownFormatIs400: an unknown export format is a clear 400, not
// the HTML page and not a 500.
func TestAuditUnknownFormatIs400(t *testing.T) {
	h := newHarness(t, false)
	rev := h.signIn("reviewer")
	for _, f := range []string{"xml", "CSV", "csv%00", "html", "json2", "%3Cscript%3E"} {
		resp, body := h.get(noRedirect(rev.c), "/audit?format="+f)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Unknown export format") || strings.Contains(body, "<script>") {
			t.Errorf("GET /audit?format=%s = %d, want 400 with a message", f, resp.StatusCode)
		}
	}
	if resp, _ := h.get(noRedirect(rev.c), "/audit?format="); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /audit?format= = %d, want the page", resp.StatusCode)
	}
}
