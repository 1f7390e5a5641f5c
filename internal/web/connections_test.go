package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// formValues is what a browser posts for the form's raw values: every
// input of the field table (not the team, which the URL gives).
func formValues(v views.ContractValues) url.Values {
	f := url.Values{}
	for _, fl := range workflow.Fields() {
		if fl.Input != workflow.InputNone {
			f[fl.Key] = slices.Clone(v[fl.Key])
		}
	}
	return f
}

func itoa0(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// session is a signed-in browser: its client and its CSRF token.
type session struct {
	c     *http.Client
	token string
}

func (h *harness) signIn(user string) session {
	h.t.Helper()
	c := h.client()
	_, body := h.login(c, user)
	m := reCSRF.FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("%s: no CSRF token after login", user)
	}
	return session{c: c, token: m[1]}
}

func (h *harness) postAs(s session, path string, form url.Values) (*http.Response, string) {
	h.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", s.token)
	return h.post(noRedirect(s.c), path, form)
}

func TestFormRoundTripsTheExampleContract(t *testing.T) {
	ex := workflow.ExampleContract()
	got, errs := contractFromForm(formFromContract(ex))
	if len(errs) > 0 {
		t.Fatalf("form errors: %v", errs)
	}
	if got.Hash() != ex.Hash() {
		t.Errorf("form round trip changed the contract:\n%v", workflow.Diff(ex, got))
	}
}

func TestConnectionRequestLifecycle(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner, member, blue, admin, finance, reviewer := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("owner.blue"), h.signIn("admin"), h.signIn("finance"), h.signIn("reviewer")

	// Bad input: kept on the form, a message beside the field, nothing stored.
	bad := formFromContract(workflow.ExampleContract())
	bad.Set("account_id", "12345")
	bad.Set("guaranteed", "ml.p5.48xlarge two")
	f := formValues(bad)
	f.Set("intent", "submit")
	resp, body := h.postAs(owner, "/teams/red/connections", f)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad contract = %d", resp.StatusCode)
	}
	for _, want := range []string{`data-testid="error-account_id"`, `data-testid="error-guaranteed"`, `value="12345"`, "ml.p5.48xlarge two"} {
		if !strings.Contains(body, want) {
			t.Errorf("re-rendered form lacks %s", want)
		}
	}
	if rows, _, _ := h.db.ListConnections(ctx, store.ListFilter{}, 0, 10); len(rows) != 0 {
		t.Fatalf("a rejected form stored %d connections", len(rows))
	}

	// Another team's owner cannot file for red; a member cannot file at all.
	if resp, _ := h.postAs(blue, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue filing for red = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(member, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member.red filing = %d, want 403", resp.StatusCode)
	}

	// The owner saves a draft, then submits it.
	resp, _ = h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/connections/1" {
		t.Fatalf("create = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	conn, err := h.db.Connection(ctx, 1)
	if err != nil || conn.State != workflow.StateDraft {
		t.Fatalf("created connection = %+v, %v", conn, err)
	}

	// Who sees it.
	for _, tc := range []struct {
		who  session
		name string
		want int
	}{{owner, "owner.red", 200}, {member, "member.red", 200}, {admin, "admin", 200}, {reviewer, "reviewer", 200}, {blue, "owner.blue", 404}, {finance, "finance", 404}} {
		for _, path := range []string{"/connections/1", "/connections/1/versions/1/contract.json", "/connections/1/versions/1/contract.yaml"} {
			if resp, _ := h.get(noRedirect(tc.who.c), path); resp.StatusCode != tc.want {
				t.Errorf("%s GET %s = %d, want %d", tc.name, path, resp.StatusCode, tc.want)
			}
		}
		_, list := h.get(tc.who.c, "/connections")
		if shown := strings.Contains(list, `data-testid="connection-1"`); shown != (tc.want == 200) {
			t.Errorf("%s: connection listed = %v", tc.name, shown)
		}
	}
	// Mutations by someone outside the team are 404 too, and change nothing.
	for _, path := range []string{"/connections/1", "/connections/1/submit", "/connections/1/withdraw", "/connections/1/decide"} {
		if resp, _ := h.postAs(blue, path, url.Values{"decision": {"approve"}, "reason": {"x"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("owner.blue POST %s = %d, want 404", path, resp.StatusCode)
		}
	}
	if resp, _ := h.get(noRedirect(member.c), "/connections/1/edit"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member.red edit = %d, want 403", resp.StatusCode)
	}

	if resp, _ := h.postAs(owner, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit = %d", resp.StatusCode)
	}
	_, q := h.get(admin.c, "/admin")
	if !strings.Contains(q, `data-testid="queue-1"`) {
		t.Error("the submitted request is not in the admin queue")
	}
	// The requester's team owner cannot approve; neither can a reviewer.
	if resp, _ := h.postAs(owner, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"mine"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner approving = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.postAs(reviewer, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reviewer approving = %d, want 403", resp.StatusCode)
	}

	v1, _ := h.db.Version(ctx, 1, 1)
	decide := func(s session, decision, reason string, version int, hash string) (*http.Response, string) {
		return h.postAs(s, "/connections/1/decide", url.Values{"decision": {decision}, "reason": {reason},
			"version": {itoa0(version)}, "hash": {hash}, "plan_hash": {h.planHash(1, version)}})
	}
	// A reason is required.
	resp, body = decide(admin, "approve", "  ", 1, v1.Hash)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-reason"`) {
		t.Errorf("approve without reason = %d", resp.StatusCode)
	}
	// No inventory yet: the capacity check blocks approval.
	resp, body = decide(admin, "approve", "looks right", 1, v1.Hash)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "capacity") {
		t.Errorf("approve over capacity = %d", resp.StatusCode)
	}
	// Ask for changes; the owner edits (version 2) and resubmits.
	if resp, _ := decide(admin, "request_changes", "lower the borrow limit", 1, v1.Hash); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("request changes = %d", resp.StatusCode)
	}
	edited := formFromContract(workflow.ExampleContract())
	edited.Set("borrow_limit_percent", "20")
	f = formValues(edited)
	f.Set("base_version", "1")
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/connections/1", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit and resubmit = %d\n%s", resp.StatusCode, body)
	}
	// The admin still acts on version 1: refused, with what changed.
	resp, body = decide(admin, "approve", "ok", 1, v1.Hash)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "changed after you opened it") || !strings.Contains(body, "Borrow limit") {
		t.Errorf("stale approval = %d\n%s", resp.StatusCode, body)
	}
	// The admin records the inventory, then approves version 2.
	if resp, body := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"4"}}); resp.StatusCode != 200 || !strings.Contains(body, "Saved") {
		t.Fatalf("set inventory = %d", resp.StatusCode)
	}
	if resp, _ := h.postAs(owner, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"400"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner setting inventory = %d, want 403", resp.StatusCode)
	}
	v2, _ := h.db.Version(ctx, 1, 2)
	if resp, body := decide(admin, "approve", "fits, owners confirmed", 2, v2.Hash); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve v2 = %d\n%s", resp.StatusCode, body)
	}
	conn, _ = h.db.Connection(ctx, 1)
	if conn.State != workflow.StateApproved || conn.ApprovedVersion != 2 {
		t.Errorf("after approval: %s, approved version %d", conn.State, conn.ApprovedVersion)
	}
	// The team sees where its work runs and how to submit it.
	_, mb := h.get(member.c, "/connections/1")
	for _, want := range []string{`data-testid="access-namespace">hyperpod-ns-red<`, `data-testid="access-queue">hyperpod-ns-red-localqueue<`,
		"aws eks update-kubeconfig --name shared-hp-eks", "kueue.x-k8s.io/queue-name: hyperpod-ns-red-localqueue",
		// HyperPod task governance's Kueue name of the contract's class
		// training: the snippet submits a training job (the contract
		// allows inference first).
		"kueue.x-k8s.io/priority-class: training-priority\n"} {
		if !strings.Contains(mb, want) {
			t.Errorf("member's view of the approved connection lacks %q", want)
		}
	}
	// Approved: the owner can no longer edit or withdraw.
	if resp, _ := h.postAs(owner, "/connections/1/withdraw", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("withdraw after approval = %d, want 403", resp.StatusCode)
	}
	// The history and the audit chain.
	_, detail := h.get(owner.c, "/connections/1")
	for _, want := range []string{"request changes", "lower the borrow limit", "fits, owners confirmed", "connection.approve", "contract.version"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail page lacks %q", want)
		}
	}
	if n, brk, err := h.db.VerifyAudit(ctx); err != nil || brk != nil || n < 6 {
		t.Errorf("audit chain: %d events, break %+v, %v", n, brk, err)
	}
	// Export round-trips to the same hash.
	resp, body = h.get(owner.c, "/connections/1/versions/2/contract.json")
	var exported json.RawMessage
	if err := json.Unmarshal([]byte(body), &exported); err != nil {
		t.Fatal(err)
	}
	got, err := workflow.DecodeContract(exported)
	if err != nil || got.Hash() != v2.Hash || resp.Header.Get("X-Contract-Hash") != v2.Hash {
		t.Errorf("exported JSON does not round-trip: %v", err)
	}
}

func TestDraftKeepsIncompleteInputAndSubmitRefusesIt(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	// A draft may be incomplete but not malformed: it must round-trip.
	broken := views.ContractValues{"team": {"red"}, "fair_share_weight": {"lots"}}
	if resp, body := h.postAs(owner, "/teams/red/connections", formValues(broken)); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `value="lots"`) {
		t.Errorf("saving a malformed draft = %d", resp.StatusCode)
	}
	partial := views.ContractValues{"team": {"red"}, "business_purpose": {"Train ranking models on the shared cluster for the red team."}}
	if resp, body := h.postAs(owner, "/teams/red/connections", formValues(partial)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving an incomplete draft = %d\n%s", resp.StatusCode, body)
	}
	resp, body := h.postAs(owner, "/connections/1/submit", nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "cannot be submitted yet") || !strings.Contains(body, `data-testid="error-account_id"`) {
		t.Errorf("submitting an incomplete draft = %d", resp.StatusCode)
	}
	if c, _ := h.db.Connection(context.Background(), 1); c.State != workflow.StateDraft {
		t.Errorf("state after a refused submit = %s", c.State)
	}
}
