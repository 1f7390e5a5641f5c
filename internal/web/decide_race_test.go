package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Issue 10, item 1: decide builds its permission check (requester,
// editors, submitters, approvers) before it reads the request body, and
// every check of the handler runs before the store's transaction. The
// tests below change the request between the handler's check and the
// commit; the store's transaction must refuse, against the rows as they
// are then, and record nothing.

// raceFixture: owner.red files and submits the example contract; the
// cluster has room for it.
func raceFixture(t *testing.T) (*harness, session, session) {
	t.Helper()
	h := newHarness(t, false)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	return h, owner, admin
}

// decision is the decide form for the version current now.
func (h *harness) decision(kind string, id int64) url.Values {
	h.t.Helper()
	conn, err := h.db.Connection(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	v, err := h.db.Version(h.t.Context(), id, conn.CurrentVersion)
	if err != nil {
		h.t.Fatal(err)
	}
	f := url.Values{"decision": {kind}, "reason": {"because"}, "version": {fmt.Sprint(v.Version)}, "hash": {v.Hash}}
	if kind == "approve" {
		f.Set("plan_hash", h.planHash(id, v.Version))
	}
	return f
}

// mustPost posts as s and fails unless the answer is 303.
func (h *harness) mustPost(s session, path string, form url.Values) {
	h.t.Helper()
	if resp, body := h.postAs(s, path, form); resp.StatusCode != http.StatusSeeOther {
		if i := strings.Index(body, "<main"); i >= 0 {
			body = body[i:]
		}
		h.t.Fatalf("POST %s = %d\n%.1500s", path, resp.StatusCode, body)
	}
}

// once returns a hook that runs f on its first call only: the requests f
// makes run the same handler, and must pass through.
func once(f func()) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			f()
		}
	}
}

// heldPost starts a POST whose body is held back: it sends the headers
// (the CSRF token in the header, so nothing reads the body before the
// handler) and returns a function that sends the body and reads the answer.
func (h *harness) heldPost(s session, path string) func(form url.Values) (int, string) {
	h.t.Helper()
	u, _ := url.Parse(h.base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	var cookies []string
	for _, ck := range s.c.Jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	head := "POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nCookie: " + strings.Join(cookies, "; ") +
		"\r\nX-CSRF-Token: " + s.token + "\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		h.t.Fatal(err)
	}
	return func(form url.Values) (int, string) {
		h.t.Helper()
		body := form.Encode()
		if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n0\r\n\r\n", len(body), body); err != nil {
			h.t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			h.t.Fatal(err)
		}
		return resp.StatusCode, readBody(h.t, resp)
	}
}

// assertNoApproval: the connection is submitted at version v with no
// approval and no job.
func (h *harness) assertNoApproval(id int64, v int) {
	h.t.Helper()
	ctx := h.t.Context()
	conn, _ := h.db.Connection(ctx, id)
	ids, _ := h.db.ApproverIDs(ctx, id, v)
	jobs, _ := h.db.JobsFor(ctx, id)
	if conn.State != workflow.StateSubmitted || conn.CurrentVersion != v || len(ids) != 0 || len(jobs) != 0 {
		h.t.Errorf("recorded: state %s at version %d, approvers %v, %d jobs; want submitted at %d, nothing else",
			conn.State, conn.CurrentVersion, ids, len(jobs), v)
	}
}

// The reported attack: an admin who owns the team holds the approve POST's
// body back, requests changes, edits and resubmits the request, then sends
// the body naming the new version. The handler's permission check was
// built before the edit; the store refuses the approval.
func TestApprovalHeldBodyAfterOwnEditIsRefused(t *testing.T) {
	h, _, _ := raceFixture(t)
	ownadmin := h.signIn("ownadmin")
	loaded := make(chan struct{})
	h.srv.decideHooks.loaded = once(func() { close(loaded) })

	send := h.heldPost(ownadmin, "/connections/1/decide")
	<-loaded // the handler read the connection, its editors and submitters

	h.mustPost(ownadmin, "/connections/1/decide", h.decision("request_changes", 1))
	c2 := workflow.ExampleContract()
	c2.Scheduling.Guaranteed[0].Count = 1
	f := formValues(formFromContract(c2))
	f.Set("base_version", "1")
	f.Set("intent", "submit")
	h.mustPost(ownadmin, "/connections/1", f)
	if conn, _ := h.db.Connection(t.Context(), 1); conn.State != workflow.StateSubmitted || conn.CurrentVersion != 2 {
		t.Fatalf("after ownadmin's edit: %s at version %d, want submitted at 2", conn.State, conn.CurrentVersion)
	}

	status, body := send(h.decision("approve", 1)) // names version 2, its hash and plan
	if status != http.StatusForbidden || !strings.Contains(body, "nobody decides on a request they filed, submitted or edited") {
		t.Errorf("held approval after editing = %d, want 403 with the reason\n%s", status, body)
	}
	h.assertNoApproval(1, 2)
}

// An admin passes the handler's check, then (before the commit) submits
// the request themselves: the store refuses the approval.
func TestApprovalAfterOwnResubmitIsRefused(t *testing.T) {
	h, _, admin := raceFixture(t)
	ownadmin := h.signIn("ownadmin")
	h.srv.decideHooks.checked = once(func() {
		h.mustPost(admin, "/connections/1/decide", h.decision("request_changes", 1))
		h.mustPost(ownadmin, "/connections/1/submit", nil) // the same version 1, now submitted by ownadmin
	})
	resp, body := h.postAs(ownadmin, "/connections/1/decide", h.decision("approve", 1))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "nobody decides on a request they filed, submitted or edited") {
		t.Errorf("approval after resubmitting = %d, want 403 with the reason\n%s", resp.StatusCode, body)
	}
	if ids, _ := h.db.SubmitterIDs(t.Context(), 1); len(ids) != 2 {
		t.Fatalf("submitters = %v, want owner.red and ownadmin", ids)
	}
	h.assertNoApproval(1, 1)
}

// Rejections and change requests follow the same rule: an admin who
// became a submitter between the handler's check and the commit is
// refused, and nothing is recorded.
func TestDecisionAfterOwnResubmitIsRefused(t *testing.T) {
	for _, kind := range []string{"reject", "request_changes"} {
		t.Run(kind, func(t *testing.T) {
			h, _, admin := raceFixture(t)
			ownadmin := h.signIn("ownadmin")
			h.srv.decideHooks.checked = once(func() {
				h.mustPost(admin, "/connections/1/decide", h.decision("request_changes", 1))
				h.mustPost(ownadmin, "/connections/1/submit", nil)
			})
			before, _ := h.db.Decisions(t.Context(), 1)
			resp, body := h.postAs(ownadmin, "/connections/1/decide", h.decision(kind, 1))
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "nobody decides on a request they filed, submitted or edited") {
				t.Errorf("%s after resubmitting = %d, want 403 with the reason\n%s", kind, resp.StatusCode, body)
			}
			after, _ := h.db.Decisions(t.Context(), 1)
			if len(after) != len(before)+1 { // admin's change request only
				t.Errorf("decisions = %+v, want only admin's change request", after)
			}
			if conn, _ := h.db.Connection(t.Context(), 1); conn.State != workflow.StateSubmitted {
				t.Errorf("state = %s, want submitted", conn.State)
			}
		})
	}
}

// Restricted data needs two distinct admins. Two approvals by the same
// admin that both pass the handler's check (neither sees the other) count
// once: the second is refused inside the transaction.
func TestSameAdminTwiceIsOneApproval(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	c := workflow.ExampleContract()
	c.DataClassification = workflow.DataRestricted
	c.EndDate = time.Now().AddDate(0, 6, 0).Format(time.DateOnly)
	f := formValues(formFromContract(c))
	f.Set("intent", "submit")
	h.mustPost(owner, "/teams/red/connections", f)
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	form := h.decision("approve", 1)
	h.srv.decideHooks.checked = once(func() {
		h.mustPost(admin, "/connections/1/decide", h.decision("approve", 1)) // approval 1 of 2
	})
	resp, body := h.postAs(admin, "/connections/1/decide", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "You already approved this version") {
		t.Errorf("the same admin's second approval = %d, want 409 saying so\n%s", resp.StatusCode, body)
	}
	conn, _ := h.db.Connection(ctx, 1)
	ids, _ := h.db.ApproverIDs(ctx, 1, 1)
	jobs, _ := h.db.JobsFor(ctx, 1)
	if conn.State != workflow.StateSubmitted || len(ids) != 1 || len(jobs) != 0 {
		t.Fatalf("after two approvals by one admin: %s, approvers %v, %d jobs; want submitted, one approver, no job", conn.State, ids, len(jobs))
	}
	// A second admin completes it.
	h.srv.decideHooks.checked = nil
	h.mustPost(h.signIn("admin2"), "/connections/1/decide", h.decision("approve", 1))
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateApproved {
		t.Errorf("after a second admin: %s, want approved", conn.State)
	}
}

// An independent admin holds an approval's body back while the owner
// changes the request to restricted data: the approval of the new version
// counts as one of the two it needs, not as the only one.
func TestHeldApprovalOfANewlyRestrictedVersionNeedsTwo(t *testing.T) {
	h, owner, admin := raceFixture(t)
	loaded := make(chan struct{})
	h.srv.decideHooks.loaded = once(func() { close(loaded) })
	send := h.heldPost(admin, "/connections/1/decide")
	<-loaded

	h.mustPost(h.signIn("admin2"), "/connections/1/decide", h.decision("request_changes", 1))
	c2 := workflow.ExampleContract()
	c2.DataClassification = workflow.DataRestricted
	c2.EndDate = time.Now().AddDate(0, 6, 0).Format(time.DateOnly)
	f := formValues(formFromContract(c2))
	f.Set("base_version", "1")
	f.Set("intent", "submit")
	h.mustPost(owner, "/connections/1", f)

	if status, body := send(h.decision("approve", 1)); status != http.StatusSeeOther {
		t.Fatalf("held approval = %d\n%s", status, body)
	}
	conn, _ := h.db.Connection(t.Context(), 1)
	ids, _ := h.db.ApproverIDs(t.Context(), 1, 2)
	jobs, _ := h.db.JobsFor(t.Context(), 1)
	if conn.State != workflow.StateSubmitted || len(ids) != 1 || len(jobs) != 0 {
		t.Errorf("one approval of restricted version 2: %s, approvers %v, %d jobs; want submitted, one, none", conn.State, ids, len(jobs))
	}
}

// The handler's capacity check is about the version the approval names:
// an admin who holds the body back while the owner raises the guarantee
// beyond the cluster's free capacity is refused, not approved against the
// smaller version the handler saw first.
func TestHeldApprovalChecksTheNamedVersionsCapacity(t *testing.T) {
	h, owner, admin := raceFixture(t) // 8 p5 instances; version 1 asks for 2
	loaded := make(chan struct{})
	h.srv.decideHooks.loaded = once(func() { close(loaded) })
	send := h.heldPost(admin, "/connections/1/decide")
	<-loaded

	h.mustPost(h.signIn("admin2"), "/connections/1/decide", h.decision("request_changes", 1))
	c2 := workflow.ExampleContract()
	c2.Scheduling.Guaranteed[0].Count = 9
	f := formValues(formFromContract(c2))
	f.Set("base_version", "1")
	f.Set("intent", "submit")
	h.mustPost(owner, "/connections/1", f)

	status, body := send(h.decision("approve", 1))
	if status != http.StatusConflict || !strings.Contains(body, "no longer fits the cluster") {
		t.Errorf("held approval of a version over capacity = %d, want 409 saying it does not fit", status)
	}
	h.assertNoApproval(1, 2)
}

// Issue 32 item 8: of concurrent approvals of one version that needs one,
// one wins and every loser is told who approved it and when, as a 409:
// not a 403 saying an approved connection cannot be approved, or that the
// next approval must come from another admin.
func TestConcurrentApprovalsLosersAreToldWhoWon(t *testing.T) {
	h, _, admin := raceFixture(t)
	admin2 := h.signIn("admin2")
	form := h.decision("approve", 1)

	// The race inside the store: admin's approval passed every check of
	// the handler; admin2's approval commits before admin's transaction.
	checked := make(chan struct{})
	release := make(chan struct{})
	h.srv.decideHooks.checked = once(func() { close(checked); <-release })
	type answer struct {
		status int
		body   string
	}
	first := make(chan answer, 1)
	go func() {
		resp, body := h.postAs(admin, "/connections/1/decide", cloneValues(form))
		first <- answer{resp.StatusCode, body}
	}()
	<-checked
	h.mustPost(admin2, "/connections/1/decide", cloneValues(form))
	close(release)
	got := <-first
	won, err := h.db.LastApproval(t.Context(), 1, 1)
	if err != nil || won.By != "admin2@example.test" {
		t.Fatalf("last approval = %+v, %v", won, err)
	}
	want := fmt.Sprintf("version 1 was already approved by admin2@example.test at %s", won.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	if got.status != http.StatusConflict || !strings.Contains(got.body, want) {
		t.Errorf("the loser inside the transaction: %d, want 409 with %q\n%.3000s", got.status, want, mainOf(got.body))
	}

	// The race before the store: the losers' handlers read the connection
	// after the winner's commit. Many at once, as both admins.
	var wg sync.WaitGroup
	answers := make(chan answer, 20)
	for i := range 20 {
		who := admin
		if i%2 == 1 {
			who = admin2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := h.postAs(who, "/connections/1/decide", cloneValues(form))
			answers <- answer{resp.StatusCode, body}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.status != http.StatusConflict || !strings.Contains(a.body, want) {
			t.Errorf("a later approval: %d, want 409 with %q\n%.3000s", a.status, want, mainOf(a.body))
		}
	}
	if ids, _ := h.db.ApproverIDs(t.Context(), 1, 1); len(ids) != 1 {
		t.Errorf("approvers = %v, want admin2 alone", ids)
	}
}

// A restricted version needs two approvals: the first admin's second try
// is still told that another admin must approve (the rule, not a race),
// and once two admins approved, a third is told who completed it.
func TestApprovalOfACompletedRestrictedVersion(t *testing.T) {
	h := newHarness(t, false)
	owner, admin, admin2 := h.signIn("owner.red"), h.signIn("admin"), h.signIn("admin2")
	ex := workflow.ExampleContract()
	ex.DataClassification = workflow.DataRestricted
	ex.EndDate = h.srv.opts.Now().AddDate(0, 2, 0).Format("2006-01-02")
	f := formValues(formFromContract(ex))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	form := h.decision("approve", 1)
	h.mustPost(admin, "/connections/1/decide", cloneValues(form))
	if resp, body := h.postAs(admin, "/connections/1/decide", cloneValues(form)); resp.StatusCode == http.StatusSeeOther || strings.Contains(body, "already approved by") {
		t.Errorf("the same admin's second approval of a version waiting for another: %d\n%.2000s", resp.StatusCode, mainOf(body))
	}
	h.mustPost(admin2, "/connections/1/decide", cloneValues(form))
	ownadmin := h.signIn("revadmin")
	resp, body := h.postAs(ownadmin, "/connections/1/decide", cloneValues(form))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "version 1 was already approved by admin2@example.test at ") {
		t.Errorf("a third approval: %d\n%.3000s", resp.StatusCode, mainOf(body))
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// mainOf is a page's <main> element onwards, for failure messages.
func mainOf(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		return body[i:]
	}
	return body
}
