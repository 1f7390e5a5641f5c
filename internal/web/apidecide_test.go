package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// decideReq is an API decision on connection id's current version as
// token: kind is approve, reject or request-changes; ifMatch "" sends the
// current version's ETag, "-" none.
func (h *harness) decideReq(token, kind string, id int64, ifMatch string, body any) (*http.Response, problemDoc) {
	h.t.Helper()
	conn, err := h.db.Connection(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	v, err := h.db.Version(h.t.Context(), id, conn.CurrentVersion)
	if err != nil {
		h.t.Fatal(err)
	}
	hdr := map[string]string{"If-Match": `"` + v.Hash + `"`}
	switch ifMatch {
	case "":
	case "-":
		hdr = nil
	default:
		hdr["If-Match"] = ifMatch
	}
	if body == nil {
		b := map[string]string{"reason": "looks right"}
		if kind == "approve" {
			b["plan_hash"] = h.planHash(id, v.Version)
		}
		body = b
	}
	data, _ := json.Marshal(body)
	resp, out := h.api(apiReq{token: token, method: http.MethodPost, path: fmt.Sprintf("/api/v1/connections/%d/%s", id, kind), body: data, headers: hdr})
	var p problemDoc
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(out, &p)
	}
	return resp, p
}

func (h *harness) stateOf(id int64) workflow.State {
	h.t.Helper()
	c, err := h.db.Connection(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c.State
}

// TestDecisionTokenSettings: only a person allowed to decide (an admin or
// a reviewer) makes a decision token; anyone else is told so on the form,
// their input kept.
func TestDecisionTokenSettings(t *testing.T) {
	h := newHarness(t, false)
	for _, who := range []string{"owner.red", "member.red", "finance"} {
		resp, body := h.postAs(h.signIn(who), "/settings/tokens", url.Values{"name": {"keep-me"}, "scope": {"decide"}, "days": {"7"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(section(body, "error-scope"), "Only admins and reviewers decide") ||
			!strings.Contains(body, `value="keep-me"`) || !strings.Contains(body, `value="decide" selected`) {
			t.Errorf("%s making a decision token = %d; want 422 with the scope's message and the input kept", who, resp.StatusCode)
		}
	}
	for _, who := range []string{"admin", "reviewer"} {
		if tok := h.tokenOf(h.newToken(h.signIn(who), workflow.TokenDecide)); tok.Scope != workflow.TokenDecide {
			t.Errorf("%s's decision token stored as %q", who, tok.Scope)
		}
	}
}

// TestAPIDecisionsAreThePages: a decision through the API is the page's:
// only a decision token decides (a read-write or read token is 403 naming
// the scope, a browser session 403), If-Match pins the version (428
// without, 412 stale), the reason is required (422 naming it), the
// requester's own decision token is refused as the page refuses them, a
// decision token limited to red does not find blue's request and approves
// red's, and each use is audited with the token's id beside the decision's
// own event.
func TestAPIDecisionsAreThePages(t *testing.T) {
	h, _, admin := raceFixture(t) // connection 1: red's, submitted by owner.red
	decide := h.newToken(admin, workflow.TokenDecide)
	for _, scope := range []workflow.TokenScope{workflow.TokenRead, workflow.TokenReadWrite} {
		tok := h.newToken(admin, scope)
		for _, kind := range []string{"approve", "reject", "request-changes"} {
			resp, p := h.decideReq(tok, kind, 1, "", nil)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "needs the decide scope") {
				t.Errorf("a %s token: %s = %d %q, want 403 naming the decide scope", scope, kind, resp.StatusCode, p.Detail)
			}
		}
	}
	data, _ := json.Marshal(map[string]string{"reason": "x", "plan_hash": h.planHash(1, 1)})
	for name, hdr := range map[string]map[string]string{"with the CSRF token": {"X-CSRF-Token": admin.token}, "without": {}} {
		if resp, _ := h.api(apiReq{client: admin.c, method: http.MethodPost, path: "/api/v1/connections/1/approve", body: data, headers: hdr}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the admin's session approving through the API %s = %d, want 403", name, resp.StatusCode)
		}
	}
	if resp, _ := h.decideReq(decide, "approve", 1, "-", nil); resp.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("no If-Match = %d, want 428", resp.StatusCode)
	}
	if resp, _ := h.decideReq(decide, "approve", 1, `"0000"`, nil); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match = %d, want 412", resp.StatusCode)
	}
	if resp, _ := h.decideReq(decide, "reject", 1, `"0000"`, nil); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match on reject = %d, want 412 (pinned in the store's transaction)", resp.StatusCode)
	}
	if resp, p := h.decideReq(decide, "approve", 1, "", map[string]string{"reason": " ", "plan_hash": h.planHash(1, 1)}); resp.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) != 1 || p.Errors[0].Field != "reason" {
		t.Errorf("no reason = %d %+v, want 422 naming reason", resp.StatusCode, p.Errors)
	}
	if resp, _ := h.decideReq(decide, "approve", 1, "", map[string]string{"reason": "x", "plan": "typo"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown field = %d, want 400", resp.StatusCode)
	}
	if resp, _ := h.decideReq(decide, "approve", 1, "", map[string]string{"reason": "x", "plan_hash": "not-the-plan"}); resp.StatusCode != http.StatusConflict {
		t.Errorf("approving another plan than the version's = %d, want 409", resp.StatusCode)
	}
	if n := h.auditCount("connection.approve") + h.auditCount("connection.reject") + h.auditCount("connection.request_changes"); n != 0 || h.stateOf(1) != workflow.StateSubmitted {
		t.Fatalf("refused decisions recorded %d events; state %s", n, h.stateOf(1))
	}

	ownadmin := h.signIn("ownadmin")
	// A decision token limited to red: blue's request is not found; red's
	// (filed by owner.red) is approved.
	blueOwner := h.signIn("owner.blue")
	blue := h.fileAs(blueOwner, "blue")
	h.mustPost(blueOwner, fmt.Sprintf("/connections/%d/submit", blue), nil)
	redOnly := h.newToken(ownadmin, workflow.TokenDecide, "red")
	for _, kind := range []string{"approve", "reject", "request-changes"} {
		if resp, _ := h.decideReq(redOnly, kind, blue, "", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a decision token limited to red: %s blue's = %d, want 404", kind, resp.StatusCode)
		}
	}
	if h.stateOf(blue) != workflow.StateSubmitted {
		t.Fatal("a refused decision changed a state")
	}
	resp, p := h.decideReq(redOnly, "approve", 1, "", nil)
	if resp.StatusCode != http.StatusOK || h.stateOf(1) == workflow.StateSubmitted {
		t.Fatalf("ownadmin's red-only decision token approving red's = %d %q; state %s", resp.StatusCode, p.Detail, h.stateOf(1))
	}
	// Audited: the use with the token's id, the approval as the page's.
	tok := h.tokenOf(redOnly)
	uses, _ := h.db.AuditEvents(t.Context(), store.AuditFilter{Action: "token.use", ObjectID: tok.ID}, 0, 10)
	approvals, _ := h.db.AuditEvents(t.Context(), store.AuditFilter{Action: "connection.approve"}, 0, 10)
	if len(uses) == 0 || uses[0].Reason != "POST /api/v1/connections/1/approve" || uses[0].Actor != "ownadmin@example.test" ||
		len(approvals) != 1 || approvals[0].Actor != "ownadmin@example.test" || approvals[0].ObjectID != 1 {
		t.Errorf("audit: uses %+v, approvals %+v", uses, approvals)
	}

	// Reject and request changes, by an unlimited decision token.
	if resp, _ := h.decideReq(decide, "request-changes", blue, "", nil); resp.StatusCode != http.StatusOK || h.stateOf(blue) != workflow.StateChangesRequested {
		t.Errorf("request changes = %d, state %s", resp.StatusCode, h.stateOf(blue))
	}
	h.mustPost(blueOwner, fmt.Sprintf("/connections/%d/submit", blue), nil)
	if resp, _ := h.decideReq(decide, "reject", blue, "", nil); resp.StatusCode != http.StatusOK || h.stateOf(blue) != workflow.StateRejected {
		t.Errorf("reject = %d, state %s", resp.StatusCode, h.stateOf(blue))
	}
}

// TestAPIApprovalRace: two admins' decision tokens approve one version
// that needs one approval: exactly one is recorded, the other is 409,
// whether it loses inside the store's transaction or before it.
func TestAPIApprovalRace(t *testing.T) {
	h, _, admin := raceFixture(t)
	tokens := []string{h.newToken(admin, workflow.TokenDecide), h.newToken(h.signIn("admin2"), workflow.TokenDecide)}
	// Inside the transaction: the first passed every check of the handler
	// when the second commits.
	checked, release := make(chan struct{}), make(chan struct{})
	h.srv.decideHooks.checked = once(func() { close(checked); <-release })
	first := make(chan int, 1)
	go func() {
		resp, _ := h.decideReq(tokens[0], "approve", 1, "", nil)
		first <- resp.StatusCode
	}()
	<-checked
	if resp, p := h.decideReq(tokens[1], "approve", 1, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the winner = %d %q", resp.StatusCode, p.Detail)
	}
	close(release)
	if got := <-first; got != http.StatusConflict {
		t.Errorf("the loser inside the transaction = %d, want 409", got)
	}
	// Before it: many at once, after the winner.
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := h.decideReq(tokens[i%2], "approve", 1, "", nil)
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusConflict {
			t.Errorf("a later approval = %d, want 409", c)
		}
	}
	if ids, _ := h.db.ApproverIDs(t.Context(), 1, 1); len(ids) != 1 {
		t.Errorf("approvers = %v, want one", ids)
	}
}

// TestAPIReviews: a connection's reviews and one review are read as the
// review pages are (reviewers, admins and the team's owners; a member is
// not found), and a reviewer's decision token decides an open review under
// the page's rules: a read-write token is 403 naming the scope, a reviewer
// inside the team is refused, bad input is 422 naming the fields, and a
// decided review is 409.
func TestAPIReviews(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 1)
	now := h.srv.opts.Now()
	r := h.openReview(1, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, 0), Evidence: testEvidence(t, now)})
	reviewer := h.signIn("reviewer")
	for who, want := range map[string]int{"reviewer": 200, "admin": 200, "owner.red": 200, "member.red": 404, "owner.blue": 404, "finance": 404} {
		tok := h.newToken(h.signIn(who), workflow.TokenRead)
		for _, path := range []string{"/api/v1/connections/1/reviews", fmt.Sprintf("/api/v1/reviews/%d", r.ID)} {
			resp, body := h.api(apiReq{token: tok, path: path})
			if resp.StatusCode != want {
				t.Errorf("%s GET %s = %d, want %d", who, path, resp.StatusCode, want)
			}
			if want == 200 && !strings.Contains(string(body), r.EvidenceHash) {
				t.Errorf("%s GET %s does not carry the review\n%s", who, path, body)
			}
		}
	}
	path := fmt.Sprintf("/api/v1/reviews/%d/decision", r.ID)
	post := func(tok string, body any) (*http.Response, problemDoc) {
		data, _ := json.Marshal(body)
		resp, out := h.api(apiReq{token: tok, method: http.MethodPost, path: path, body: data})
		var p problemDoc
		_ = json.Unmarshal(out, &p)
		return resp, p
	}
	renew := map[string]string{"decision": "renew", "reason": "still needed"}
	if resp, p := post(h.newToken(reviewer, workflow.TokenReadWrite), renew); resp.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "needs the decide scope") {
		t.Errorf("a read-write token deciding a review = %d %q", resp.StatusCode, p.Detail)
	}
	if resp, _ := post(h.newToken(h.signIn("revred"), workflow.TokenDecide), renew); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reviewer in team red deciding red's review = %d, want 403", resp.StatusCode)
	}
	decide := h.newToken(reviewer, workflow.TokenDecide)
	if resp, p := post(decide, map[string]string{"decision": "request_changes", "reason": " "}); resp.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) != 2 || p.Errors[0].Field != "deadline" || p.Errors[1].Field != "reason" {
		t.Errorf("no reason, no deadline = %d %+v", resp.StatusCode, p.Errors)
	}
	if h.auditCount("review.request_changes")+h.auditCount("review.renew") != 0 {
		t.Fatal("a refused review decision was recorded")
	}
	resp, body := h.api(apiReq{token: decide, method: http.MethodPost, path: path, body: []byte(`{"decision":"renew","reason":"still needed"}`)})
	var got apiReviewBody
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Open || got.Decision != "renew" || got.DecidedBy != "reviewer@example.test" {
		t.Fatalf("renew = %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := post(decide, renew); resp.StatusCode != http.StatusConflict {
		t.Errorf("deciding a decided review = %d, want 409", resp.StatusCode)
	}
	if fresh, _ := h.db.Review(t.Context(), r.ID); fresh.Decision != workflow.ReviewRenew || fresh.DecidedByEmail != "reviewer@example.test" {
		t.Errorf("stored review %+v", fresh)
	}
}

// TestAPIDecisionOfOwnRequestIsRefused: the decision token of the person
// who filed and submitted a request (ownadmin, an admin who owns red) is
// refused each decision as the page refuses them, and nothing is recorded.
func TestAPIDecisionOfOwnRequestIsRefused(t *testing.T) {
	h := newHarness(t, false)
	ownadmin := h.signIn("ownadmin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.mustPost(ownadmin, "/teams/red/connections", f)
	tok := h.newToken(ownadmin, workflow.TokenDecide)
	_, page := h.postAs(ownadmin, "/connections/1/decide", h.decision("approve", 1))
	for _, kind := range []string{"approve", "reject", "request-changes"} {
		resp, p := h.decideReq(tok, kind, 1, "", nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "filed this request") || !strings.Contains(page, "filed this request") {
			t.Errorf("the requester's decision token: %s = %d %q, want 403 as the page (%q)", kind, resp.StatusCode, p.Detail, mainOf(page))
		}
	}
	if h.stateOf(1) != workflow.StateSubmitted || h.auditCount("connection.approve")+h.auditCount("connection.reject")+h.auditCount("connection.request_changes") != 0 {
		t.Error("a refused decision was recorded")
	}
}
