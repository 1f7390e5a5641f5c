package web

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestAuditPageShowsTheChainHead(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	h.postAs(owner, "/connections/1/submit", nil)
	rev := h.signIn("reviewer")
	// The page shows the chain's head, to be kept outside the database.
	head, err := h.db.AuditHead(context.Background())
	if err != nil || head.Count != 2 {
		t.Fatalf("head: %+v %v", head, err)
	}
	_, page := h.get(rev.c, "/audit")
	if !strings.Contains(page, `data-testid="audit-head"`) || !strings.Contains(page, head.Hash) || !strings.Contains(page, "Chain head: 2 events, newest #2") {
		t.Errorf("the audit page does not show the chain head %+v", head)
	}
	// With the shared checkpoint moved on (the background check), the
	// page walks only what was appended after it, and still shows the
	// whole chain's head and count.
	cp, brk, err := h.db.VerifyAuditFrom(context.Background(), store.AuditCheckpoint{})
	if err != nil || brk != nil {
		t.Fatal(err, brk)
	}
	if err := h.db.AdvanceAuditCheckpoint(context.Background(), cp, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.postAs(owner, "/connections/1/withdraw", url.Values{"reason": {"not needed"}})
	if head, err = h.db.AuditHead(context.Background()); err != nil || head.Count != 3 {
		t.Fatalf("head: %+v %v", head, err)
	}
	_, page = h.get(rev.c, "/audit")
	if !strings.Contains(page, head.Hash) || !strings.Contains(page, "Chain head: 3 events, newest #3") {
		t.Errorf("after the checkpoint, the audit page does not show the chain head %+v", head)
	}
}

// The export streams every matching event: none is cut off at a limit.
func TestAuditExportStreamsEveryEvent(t *testing.T) {
	h := newHarness(t, false)
	const n = 10050
	// Rows written straight into the table (the export reads them; the
	// chain is not what this test is about).
	if err := h.db.ExecForTest(context.Background(), fmt.Sprintf(`
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d)
INSERT INTO audit_events (at, actor, action, object_type, team, reason, prev_hash, hash)
SELECT '2026-11-30T12:00:00Z', 'system', 'test.event', 'cluster', 'red', 'row ' || i, 'p', 'h' || i FROM seq`, n)); err != nil {
		t.Fatal(err)
	}
	rev := h.signIn("reviewer")
	resp, csvBody := h.get(rev.c, "/audit?format=csv")
	recs, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if resp.StatusCode != 200 || err != nil || len(recs) != n+1 {
		t.Fatalf("CSV export = %d, %d records (want %d and a header), %v", resp.StatusCode, len(recs)-1, n, err)
	}
	if recs[1][0] != strconv.Itoa(n) || recs[n][0] != "1" {
		t.Errorf("CSV export runs from #%s to #%s, want newest first from #%d to #1", recs[1][0], recs[n][0], n)
	}
	resp, jsonBody := h.get(rev.c, "/audit?format=json&team=red")
	var rows []struct {
		ID     int64  `json:"id"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(jsonBody), &rows); resp.StatusCode != 200 || err != nil || len(rows) != n {
		t.Fatalf("JSON export = %d, %d rows (want %d), %v", resp.StatusCode, len(rows), n, err)
	}
	seen := map[int64]bool{}
	for _, r := range rows {
		seen[r.ID] = true
	}
	if len(seen) != n || rows[n-1].Reason != "row 1" {
		t.Errorf("JSON export: %d distinct events, last %+v", len(seen), rows[n-1])
	}
	// An empty result is still a JSON array.
	if _, body := h.get(rev.c, "/audit?format=json&team=nobody"); strings.TrimSpace(body) != "[]" {
		t.Errorf("empty JSON export = %q", body)
	}
}

// The audit page's verification checkpoint is the database's: every
// replica's page starts from the checkpoint the background check stored
// (not one of its own), and a page view writes nothing.
func TestAuditCheckpointIsSharedByReplicas(t *testing.T) {
	h, owner := checkedTwoEvents(t)
	ctx := context.Background()
	// Event 1 is altered afterwards: the pages of every replica start
	// after the shared checkpoint, so they do not walk it again (that is
	// `portal audit verify`'s full walk); a page of its own would.
	if err := h.db.ExecForTest(ctx, `DROP TRIGGER audit_no_update`, `UPDATE audit_events SET reason = 'forged' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	opts := h.srv.opts
	opts.Registry = nil
	second, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Server{h.srv, second} {
		if cp, brk, err := s.verifyAuditSinceCheckpoint(ctx); err != nil || brk != nil || cp.Count != 2 {
			t.Errorf("replica %d's look = %d, %+v, %v; want 2 events from the shared checkpoint", i+1, cp.Count, brk, err)
		}
	}
	// An event appended and altered after the checkpoint is caught by both.
	h.postAs(owner, "/connections/1/withdraw", url.Values{"reason": {"x"}})
	if err := h.db.ExecForTest(ctx, `UPDATE audit_events SET reason = 'forged' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Server{h.srv, second} {
		if _, brk, err := s.verifyAuditSinceCheckpoint(ctx); err != nil || brk == nil || brk.ID != 3 {
			t.Errorf("replica %d's look after a forged event 3 = %+v, %v", i+1, brk, err)
		}
	}
}

// TestAuditPageShowsAForgeryAtOnce: an event altered right after an audit
// page view verified it shows as a break at the very next view (the page
// is not served from the cache: the forgery is a commit, which moves the
// data version; nor from an earlier look).
func TestAuditPageShowsAForgeryAtOnce(t *testing.T) {
	h, owner := checkedTwoEvents(t)
	ctx := context.Background()
	h.postAs(owner, "/connections/1/withdraw", url.Values{"reason": {"x"}})
	admin := h.signIn("admin")
	for range 2 {
		if resp, page := h.get(admin.c, "/audit"); resp.StatusCode != 200 || !strings.Contains(page, `data-testid="chain-ok"`) {
			t.Fatalf("audit page before the forgery = %d, chain intact %v", resp.StatusCode, strings.Contains(page, `data-testid="chain-ok"`))
		}
	}
	if err := h.db.ExecForTest(ctx, `DROP TRIGGER IF EXISTS audit_no_update`, `UPDATE audit_events SET reason = 'forged' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	if _, page := h.get(admin.c, "/audit"); !strings.Contains(page, `data-testid="chain-broken"`) {
		t.Error("the audit page viewed right after event 3 was forged does not show the break")
	}
}

// TestDetailHistoryIsTheLatest: a connection's page lists its latest
// detailHistory events, not its whole history, and says where the rest
// is: for an admin the audit trail filtered to the connection (which
// holds the oldest), for the owner the evidence bundle.
func TestDetailHistoryIsTheLatest(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	admin := h.signIn("admin")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	var stmts []string
	for i := range detailHistory + 5 {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO audit_events (at, actor_id, actor, action, object_type, object_id, team, version, reason, prev_hash, hash)
			VALUES ('2026-01-01T00:00:00.000000000Z', NULL, 'seed@example.test', 'connection.note', 'connection', 1, 'red', 1, 'note %02d', '', '')`, i))
	}
	if err := h.db.ExecForTest(context.Background(), stmts...); err != nil {
		t.Fatal(err)
	}
	_, page := h.get(admin.c, "/connections/1")
	if n := strings.Count(page, "note "); n != detailHistory {
		t.Errorf("the admin's page lists %d seeded events; want the latest %d", n, detailHistory)
	}
	if !strings.Contains(page, "note 29") || strings.Contains(page, "note 00") {
		t.Error("the page does not list the latest events")
	}
	if !strings.Contains(page, `data-testid="audit-more"`) || !strings.Contains(page, `href="/audit?object=1"`) {
		t.Error("the admin's page does not say the audit trail holds the rest")
	}
	if resp, trail := h.get(admin.c, "/audit?object=1"); resp.StatusCode != 200 || !strings.Contains(trail, "note 00") {
		t.Errorf("the audit trail of connection 1 = %d, holding the oldest event: %v", resp.StatusCode, strings.Contains(trail, "note 00"))
	}
	_, page = h.get(owner.c, "/connections/1")
	if strings.Contains(page, `href="/audit?object=1"`) || !strings.Contains(page, "All of them: the evidence bundle above.") {
		t.Error("the owner's page: no audit trail link (admins only), the evidence bundle named instead")
	}
}

// checkedTwoEvents is a harness where owner.red filed and submitted
// connection 1 (two audit events) and some replica's background check has
// verified both (the shared checkpoint).
func checkedTwoEvents(t *testing.T) (*harness, session) {
	t.Helper()
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(workflow.ExampleContract())))
	h.postAs(owner, "/connections/1/submit", nil)
	if cp, brk, err := h.db.VerifyAuditSinceCheckpoint(context.Background(), time.Now()); err != nil || brk != nil || cp.Count != 2 {
		t.Fatalf("background check = %+v, %+v, %v", cp, brk, err)
	}
	return h, owner
}
