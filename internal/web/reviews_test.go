package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// liveRed files n copies of team red's example contract as owner.red and
// marks them active on version 1 (the review pages are about what happens
// after approval, not how a connection gets there).
func liveRed(t *testing.T, h *harness, n int) {
	t.Helper()
	owner := h.signIn("owner.red")
	for range n {
		if resp, body := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract()))); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("create = %d\n%s", resp.StatusCode, body)
		}
	}
	if err := h.db.ExecForTest(t.Context(), `UPDATE connections SET state = 'active', approved_version = 1, submitted_at = created_at`); err != nil {
		t.Fatal(err)
	}
}

// testEvidence is evidence as the scheduler freezes it, with one gap.
func testEvidence(t *testing.T, at time.Time) []byte {
	t.Helper()
	c := workflow.ExampleContract()
	ev := workflow.Evidence{
		CollectedAt: at,
		Contract:    workflow.EvidenceContract{Version: 1, Hash: c.Hash(), ApprovedAt: at.Add(-48 * time.Hour), Contract: c},
		Changes:     []workflow.EvidenceChange{{Version: 1, Hash: c.Hash(), ApprovedAt: at.Add(-48 * time.Hour), ApprovedBy: "admin@example.test", Fields: []string{"owners", "scheduling"}}},
		Drift:       &workflow.EvidenceDrift{CheckedAt: at.Add(-time.Hour), Status: "drifted", Findings: []string{"RoleBinding team-red-edit changed by hand"}},
		Owners: []workflow.EvidenceOwner{
			{Role: "business", Email: "owner.red@example.test", InOwnersGroup: "yes", LastSignIn: at.Add(-2 * time.Hour)},
			{Role: "operations", Email: "gone.red@example.test", InOwnersGroup: "no"},
		},
		Signals: []workflow.EvidenceSignal{{Signal: "idle_guarantee", FiredAt: at.Add(-3 * time.Hour), Detail: "guarantee 5% used over 7 days"}},
		Gaps:    []string{"usage: no usage collector is configured (no --kubeconfig)"},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h *harness) openReview(id int64, in workflow.OpenReviewInput) store.Review {
	h.t.Helper()
	r, err := h.db.OpenReview(h.t.Context(), id, in, h.srv.opts.Now())
	if err != nil {
		h.t.Fatalf("open review of %d: %v", id, err)
	}
	return r
}

func day(now time.Time, days int) string {
	return now.UTC().AddDate(0, 0, days).Format(workflow.DateLayout)
}

var reRow = regexp.MustCompile(`data-testid="review-(\d+)"`)

// The queue: open reviews, the longest due first, with days overdue
// counted on the portal's clock, event triggers with their detail and the
// triggers that joined them, orphans flagged; filters by team and trigger,
// refusing values it does not know with a message; a bounded page with a
// link to the next.
func TestReviewQueue(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 4)
	now := h.srv.opts.Now()
	ev := testEvidence(t, now)
	later := h.openReview(1, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, 3), Evidence: ev})
	overdue := h.openReview(2, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, -10), Evidence: ev})
	event := h.openReview(3, workflow.OpenReviewInput{Trigger: workflow.TriggerOwnerLeft, Detail: "gone.red@example.test left team-red-owners", DueOn: day(now, -2), Evidence: ev})
	decided := h.openReview(4, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, -30), Evidence: ev})
	if _, err := h.db.RecordReviewEvent(t.Context(), 3, store.ReviewEvent{Open: true, Trigger: workflow.TriggerSignal, Detail: "idle guarantee"}, now); err != nil {
		t.Fatal(err)
	}
	rev := h.signIn("reviewer")
	reviewer, _ := h.db.UserByEmail(t.Context(), "reviewer@example.test")
	if _, err := h.db.DecideReview(t.Context(), decided.ID, workflow.Actor{ID: reviewer.ID, Email: reviewer.Email}, workflow.DecideReviewInput{Decision: workflow.ReviewRenew, Reason: "fine"}, now); err != nil {
		t.Fatal(err)
	}
	if err := h.db.ExecForTest(t.Context(), `UPDATE connections SET orphan = 'no owner is still in team-red-owners' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}

	resp, body := h.get(rev.c, "/reviews")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /reviews = %d", resp.StatusCode)
	}
	var order []string
	for _, m := range reRow.FindAllStringSubmatch(body, -1) {
		order = append(order, m[1])
	}
	if want := []string{fmt.Sprint(overdue.ID), fmt.Sprint(event.ID), fmt.Sprint(later.ID)}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("queue order %v, want %v (the longest due first; decided reviews left out)", order, want)
	}
	row := func(id int64) string { return section(body, fmt.Sprintf("review-%d", id)) }
	if !strings.Contains(row(overdue.ID), "10 days overdue") || !strings.Contains(row(event.ID), "2 days overdue") || strings.Contains(row(later.ID), "overdue") {
		t.Errorf("days overdue wrong:\n%s", section(body, "review-queue"))
	}
	if r := row(event.ID); !strings.Contains(r, "Owner left the owners group") || !strings.Contains(r, "gone.red@example.test left team-red-owners") ||
		!strings.Contains(r, "signal: idle guarantee") || !strings.Contains(r, `data-testid="orphan-flag"`) {
		t.Errorf("event row lacks its trigger, detail, more triggers or orphan flag:\n%s", r)
	}
	if !strings.Contains(body, "3 open · 2 overdue") {
		t.Errorf("counts missing:\n%s", section(body, "review-counts"))
	}

	_, body = h.get(rev.c, "/reviews?trigger=owner_left")
	if n := len(reRow.FindAllString(body, -1)); n != 1 || !strings.Contains(body, fmt.Sprintf("review-%d", event.ID)) {
		t.Errorf("trigger filter: %d rows", n)
	}
	resp, body = h.get(rev.c, "/reviews?team=blue")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "No open review matches") {
		t.Errorf("team blue: %d, want the empty filtered state", resp.StatusCode)
	}
	for q, want := range map[string]string{
		"team=nope":              `There is no team &#34;nope&#34; with reviews`,
		"trigger=%3Cscript%3E":   `&#34;&lt;script&gt;&#34; is not a review trigger`,
		"after=yesterday":        "The page link is not valid",
		"after=2026-01-01~-3":    "The page link is not valid",
		"team=red&trigger=bogus": "is not a review trigger",
	} {
		resp, body := h.get(rev.c, "/reviews?"+q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, want) || !strings.Contains(body, `data-testid="filter-error"`) {
			t.Errorf("/reviews?%s = %d, want 400 with %q", q, resp.StatusCode, want)
		}
	}

	// A bounded page, and a link to the next one.
	reviewPageSize = 2
	t.Cleanup(func() { reviewPageSize = 50 })
	h.srv.pages.clear() // the page size is not data: the kept pages were rendered with 50
	_, body = h.get(rev.c, "/reviews")
	m := regexp.MustCompile(`href="(/reviews\?after=[^"]+)" data-testid="next-page"`).FindStringSubmatch(body)
	if len(reRow.FindAllString(body, -1)) != 2 || m == nil {
		t.Fatalf("first page of 2: %d rows, next %v", len(reRow.FindAllString(body, -1)), m)
	}
	_, body = h.get(rev.c, strings.ReplaceAll(m[1], "&amp;", "&"))
	if got := reRow.FindAllStringSubmatch(body, -1); len(got) != 1 || got[0][1] != fmt.Sprint(later.ID) || strings.Contains(body, `data-testid="next-page"`) {
		t.Errorf("second page: %v", got)
	}

	// The reviewer's home card counts them.
	_, home := h.get(rev.c, "/")
	if !strings.Contains(section(home, "card-reviews"), "3 open, 2 overdue") {
		t.Errorf("home card:\n%s", section(home, "card-reviews"))
	}
	// The empty queue explains what reviews are.
	h2 := newHarness(t, false)
	_, body = h2.get(h2.signIn("reviewer").c, "/reviews")
	if !strings.Contains(section(body, "review-home"), "comes due on its contract's review cadence") {
		t.Errorf("empty state:\n%s", section(body, "review-home"))
	}
}

// The review page shows the frozen evidence, its hash and what could not
// be collected; the team's owner reads it without the form; members,
// finance and other teams' owners get 404 on the page and the decision.
func TestReviewPageEvidenceAndWhoSeesIt(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 2)
	now := h.srv.opts.Now()
	ev := testEvidence(t, now)
	r := h.openReview(1, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, -1), Evidence: ev})
	bad := h.openReview(2, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, Evidence: []byte(`{"contract":"not an object"}`)})
	rev := h.signIn("reviewer")
	path := fmt.Sprintf("/reviews/%d", r.ID)
	resp, body := h.get(rev.c, path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	for _, want := range []string{
		store.EvidenceHash(ev), `href="/connections/1/versions/1/contract.json"`, `href="/connections/1"`,
		"owners, scheduling", "drifted", "RoleBinding team-red-edit changed by hand",
		"gone.red@example.test", "never signed in", "idle_guarantee", "guarantee 5% used over 7 days",
		"Not collected: usage: no usage collector is configured", `data-testid="evidence-no-usage"`,
		"1 days overdue", `data-testid="review-decide-form"`, "owner.red@example.test",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("review page lacks %q", want)
		}
	}
	if _, body := h.get(rev.c, fmt.Sprintf("/reviews/%d", bad.ID)); !strings.Contains(body, `data-testid="evidence-error"`) {
		t.Error("unreadable evidence is not reported")
	}
	// The team's owner reads it, without the form; an admin too.
	for _, who := range []string{"owner.red", "admin"} {
		resp, body := h.get(h.signIn(who).c, path)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, `data-testid="review-decide-form"`) || !strings.Contains(body, "drifted") {
			t.Errorf("%s GET %s = %d (form shown: %v)", who, path, resp.StatusCode, strings.Contains(body, "review-decide-form"))
		}
	}
	for _, who := range []string{"owner.blue", "member.red", "finance"} {
		s := h.signIn(who)
		if resp, _ := h.get(noRedirect(s.c), path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s GET %s = %d, want 404", who, path, resp.StatusCode)
		}
		if resp, _ := h.postAs(s, path+"/decide", url.Values{"decision": {"renew"}, "reason": {"x"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s POST %s/decide = %d, want 404", who, path, resp.StatusCode)
		}
	}
	for _, p := range []string{"/reviews/99", "/reviews/x", "/reviews/0"} {
		if resp, _ := h.get(rev.c, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	if c, _ := h.db.Connection(t.Context(), 1); c.State != workflow.StateUnderReview {
		t.Errorf("refused decisions moved the connection to %s", c.State)
	}
}

// Each decision, from the form: a reason is required and the input is
// kept; request changes needs a deadline after today; renew returns the
// connection to active with its next due date; a second decision is a
// 409; reviewers who filed, edited or belong to the team are refused,
// an admin who owns the team included; owners and admins do not decide.
func TestReviewDecisions(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 4)
	ctx := t.Context()
	now := h.srv.opts.Now()
	ev := testEvidence(t, now)
	rev := h.signIn("reviewer")
	reviews := map[int64]store.Review{}
	for id := int64(1); id <= 4; id++ {
		reviews[id] = h.openReview(id, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, 0), Evidence: ev})
	}
	decide := func(s session, id int64, f url.Values) (*http.Response, string) {
		return h.postAs(s, fmt.Sprintf("/reviews/%d/decide", reviews[id].ID), f)
	}

	// Reason required, input kept.
	resp, body := decide(rev, 1, url.Values{"decision": {"request_changes"}, "deadline": {day(now, 14)}, "reason": {"  "}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-reason"`) ||
		!strings.Contains(body, `value="`+day(now, 14)+`"`) || !regexp.MustCompile(`value="request_changes" checked`).MatchString(body) {
		t.Errorf("no reason: %d; want 422 with the error and the deadline and decision kept", resp.StatusCode)
	}
	for deadline, want := range map[string]string{"": "Give the owners a deadline", "soon": "YYYY-MM-DD", day(now, 0): "after today", day(now, -3): "after today"} {
		resp, body := decide(rev, 1, url.Values{"decision": {"request_changes"}, "deadline": {deadline}, "reason": {"name a new owner"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(section(body, "error-deadline"), want) || !strings.Contains(body, ">name a new owner</textarea>") {
			t.Errorf("deadline %q: %d; want 422 %q with the reason kept", deadline, resp.StatusCode, want)
		}
	}
	if resp, body := decide(rev, 1, url.Values{"decision": {"approve"}, "reason": {"x"}}); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-decision"`) {
		t.Errorf("unknown decision: %d", resp.StatusCode)
	}

	// Who may not decide: the team's owner, an admin, a reviewer in the
	// team, an admin-reviewer who owns the team, a reviewer who edited it.
	for _, who := range []string{"owner.red", "admin", "revred", "revadmin"} {
		if resp, _ := decide(h.signIn(who), 1, url.Values{"decision": {"renew"}, "reason": {"mine"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s deciding = %d, want 403", who, resp.StatusCode)
		}
	}
	_, page := h.get(h.signIn("revadmin").c, fmt.Sprintf("/reviews/%d", reviews[1].ID))
	if !strings.Contains(page, "nobody reviews their own team&#39;s connection") || strings.Contains(page, "review-decide-form") {
		t.Error("the admin who owns the team is not told why they cannot review")
	}
	reviewer, _ := h.db.UserByEmail(ctx, "reviewer@example.test")
	if err := h.db.ExecForTest(ctx, fmt.Sprintf(`INSERT INTO contract_versions (connection_id, version, body, hash, namespaces, author_id, created_at)
		SELECT connection_id, 2, body, hash, namespaces, %d, created_at FROM contract_versions WHERE connection_id = 4 AND version = 1`, reviewer.ID)); err != nil {
		t.Fatal(err)
	}
	if resp, _ := decide(rev, 4, url.Values{"decision": {"renew"}, "reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reviewer who edited the contract = %d, want 403", resp.StatusCode)
	}

	// Renew: active, next review due a cadence later; shown everywhere.
	if resp, _ := decide(rev, 1, url.Values{"decision": {"renew"}, "reason": {"in use, owners present"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("renew = %d", resp.StatusCode)
	}
	c1, _ := h.db.Connection(ctx, 1)
	v, _ := h.db.Version(ctx, 1, 1)
	wantDue := workflow.NextReviewDue(now, v.Contract.ReviewCadenceDays, v.Contract.EndDate)
	if c1.State != workflow.StateActive || c1.ReviewDue != wantDue {
		t.Errorf("after renewal: %s due %q, want active due %s", c1.State, c1.ReviewDue, wantDue)
	}
	_, body = h.get(rev.c, fmt.Sprintf("/reviews/%d", reviews[1].ID))
	if !strings.Contains(section(body, "review-decision"), "Renew") || !strings.Contains(body, "reviewer@example.test") || !strings.Contains(body, "in use, owners present") || strings.Contains(body, "review-decide-form") {
		t.Error("the decided review does not show its decision, who and why")
	}
	_, body = h.get(h.signIn("owner.red").c, "/connections/1")
	if !strings.Contains(section(body, "next-review-due"), wantDue) || !strings.Contains(section(body, "review-history"), "in use, owners present") {
		t.Errorf("connection page lacks the due date or the history:\n%s", section(body, "connection-reviews"))
	}
	// A second decision: 409, explained.
	resp, body = decide(rev, 1, url.Values{"decision": {"hold"}, "reason": {"again"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already decided by reviewer@example.test") {
		t.Errorf("second decision = %d", resp.StatusCode)
	}

	// Request changes: active, follow-up on the deadline; hold: active.
	if resp, _ := decide(rev, 2, url.Values{"decision": {"request_changes"}, "deadline": {day(now, 14)}, "reason": {"name a new owner"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("request changes = %d", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 2); c.State != workflow.StateActive || c.ReviewDue != day(now, 14) {
		t.Errorf("after request changes: %s due %s", c.State, c.ReviewDue)
	}
	if resp, _ := decide(rev, 3, url.Values{"decision": {"hold"}, "reason": {"idle for a month"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("hold = %d", resp.StatusCode)
	}
	if r, _ := h.db.Review(ctx, reviews[3].ID); r.Decision != workflow.ReviewHold {
		t.Errorf("hold recorded as %q", r.Decision)
	}
}

// A recommendation of revocation keeps the connection under review and
// waits on the admin queue; an admin declines it with a reason (back to
// active, next due date, audit) or revokes through the revocation; the
// admin who owns the team may not decline; reviewers cannot revoke.
func TestRecommendationOfRevocation(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 2)
	ctx := t.Context()
	now := h.srv.opts.Now()
	rev := h.signIn("reviewer")
	for id := int64(1); id <= 2; id++ {
		r := h.openReview(id, workflow.OpenReviewInput{Trigger: workflow.TriggerOrphan, Detail: "no owner left", Evidence: testEvidence(t, now)})
		if resp, _ := h.postAs(rev, fmt.Sprintf("/reviews/%d/decide", r.ID), url.Values{"decision": {"recommend_revocation"}, "reason": {"project ended"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("recommend = %d", resp.StatusCode)
		}
	}
	if c, _ := h.db.Connection(ctx, 1); c.State != workflow.StateUnderReview {
		t.Errorf("after the recommendation: %s, want under review", c.State)
	}
	// Reviewers cannot revoke.
	if resp, _ := h.postAs(rev, "/connections/1/revoke", url.Values{"reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reviewer revoking = %d, want 403", resp.StatusCode)
	}
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin")
	if !strings.Contains(section(body, "recommended-revocations"), `href="/connections/1"`) || !strings.Contains(body, "project ended") {
		t.Errorf("admin queue lacks the recommendations:\n%s", section(body, "recommended-revocations"))
	}
	_, body = h.get(admin.c, "/connections/1")
	if !strings.Contains(body, `data-testid="decline-form"`) || !strings.Contains(body, `data-testid="revoke-form"`) {
		t.Error("the admin's connection page lacks the decline or the revoke form")
	}
	ownadmin := h.signIn("ownadmin")
	if _, body := h.get(ownadmin.c, "/connections/1"); !strings.Contains(body, `data-testid="decline-note"`) || strings.Contains(body, `data-testid="decline-form"`) {
		t.Error("the admin who owns team red is offered the decline")
	}
	if resp, _ := h.postAs(ownadmin, "/connections/1/decline-revocation", url.Values{"reason": {"mine"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner-admin declining = %d, want 403", resp.StatusCode)
	}
	for _, who := range []string{"reviewer", "owner.red"} {
		if resp, _ := h.postAs(h.signIn(who), "/connections/1/decline-revocation", url.Values{"reason": {"keep"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s declining = %d, want 403", who, resp.StatusCode)
		}
	}
	if resp, _ := h.postAs(h.signIn("owner.blue"), "/connections/1/decline-revocation", url.Values{"reason": {"keep"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("owner.blue declining = %d, want 404", resp.StatusCode)
	}
	resp, body := h.postAs(admin, "/connections/1/decline-revocation", url.Values{"reason": {" "}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-decline-reason"`) {
		t.Errorf("decline without a reason = %d", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/connections/1/decline-revocation", url.Values{"reason": {"still needed for the spring run"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decline = %d", resp.StatusCode)
	}
	c, _ := h.db.Connection(ctx, 1)
	v, _ := h.db.Version(ctx, 1, 1)
	if c.State != workflow.StateActive || c.ReviewDue != workflow.NextReviewDue(now, v.Contract.ReviewCadenceDays, v.Contract.EndDate) {
		t.Errorf("after the decline: %s due %q", c.State, c.ReviewDue)
	}
	if resp, _ := h.postAs(admin, "/connections/1/decline-revocation", url.Values{"reason": {"again"}}); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusConflict {
		t.Errorf("a second decline = %d, want refused", resp.StatusCode)
	}
	events, _ := h.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: 1}, 0, 100)
	found := false
	for _, e := range events {
		found = found || e.Action == "review.decline_revocation" && e.Reason == "still needed for the spring run"
	}
	if !found {
		t.Error("the decline is not in the audit trail")
	}
	// The other recommendation: the admin revokes it.
	if resp, _ := h.postAs(admin, "/connections/2/revoke", url.Values{"reason": {"as recommended"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if _, body := h.get(admin.c, "/admin"); strings.Contains(body, "recommended-revocations") {
		t.Error("handled recommendations still listed")
	}
}

// An orphan is flagged on every page where its connection appears.
func TestOrphanFlagEverywhere(t *testing.T) {
	h := newHarness(t, false)
	liveRed(t, h, 1)
	h.openReview(1, workflow.OpenReviewInput{Trigger: workflow.TriggerOrphan, Evidence: testEvidence(t, h.srv.opts.Now())})
	if err := h.db.ExecForTest(t.Context(), `UPDATE connections SET orphan = 'no business purpose'`); err != nil {
		t.Fatal(err)
	}
	rev, owner := h.signIn("reviewer"), h.signIn("owner.red")
	pages := map[string]session{"/connections/1": owner, "/connections": owner, "/teams/red": owner, "/reviews": rev, "/reviews/1": rev}
	for p, s := range pages {
		if _, body := h.get(s.c, p); !strings.Contains(body, `data-testid="orphan-flag"`) || !strings.Contains(body, "no business purpose") {
			t.Errorf("%s lacks the orphan flag", p)
		}
	}
	// The admin queue, where the connection waits as a recommendation.
	if resp, _ := h.postAs(rev, "/reviews/1/decide", url.Values{"decision": {"recommend_revocation"}, "reason": {"orphan"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("recommend = %d", resp.StatusCode)
	}
	if _, body := h.get(h.signIn("admin").c, "/admin"); !strings.Contains(section(body, "recommended-revocations"), "no business purpose") {
		t.Error("/admin lacks the orphan flag")
	}
}

// Issue 32 nit: a review whose stored evidence was altered is refused as a
// 500 only to those who may read it; to another team it does not exist
// (404), as any of that team's reviews.
func TestAlteredReviewIsAuthorizedFirst(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	liveRed(t, h, 2)
	now := h.srv.opts.Now()
	r := h.openReview(1, workflow.OpenReviewInput{Trigger: workflow.TriggerScheduled, DueOn: day(now, -1), Evidence: testEvidence(t, now)})
	if err := h.db.ExecForTest(t.Context(), `DROP TRIGGER reviews_frozen`, fmt.Sprintf(`UPDATE reviews SET evidence = '{"a":2}' WHERE id = %d`, r.ID)); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/reviews/%d", r.ID)
	for who, want := range map[string]int{"reviewer": 500, "owner.red": 500, "owner.blue": 404, "member.red": 404, "finance": 404} {
		resp, body := h.get(noRedirect(h.signIn(who).c), path)
		if resp.StatusCode != want || (want == 404) == strings.Contains(body, "evidence was changed") {
			t.Errorf("%s GET %s = %d, want %d", who, path, resp.StatusCode, want)
		}
	}
}
