package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// auditPages follows GET path's next links with token and returns every
// event of every page, in order.
func (h *harness) auditPages(token, path string) []auditJSONRow {
	h.t.Helper()
	var all []auditJSONRow
	for pages := 0; path != ""; pages++ {
		if pages > 1000 {
			h.t.Fatal("the next links do not end")
		}
		resp, body := h.api(apiReq{token: token, path: path})
		if resp.StatusCode != http.StatusOK {
			h.t.Fatalf("GET %s = %d\n%s", path, resp.StatusCode, body)
		}
		var pg struct {
			Items []auditJSONRow
			Next  string
		}
		if err := json.Unmarshal(body, &pg); err != nil {
			h.t.Fatal(err)
		}
		all = append(all, pg.Items...)
		path = pg.Next
	}
	return all
}

// storeAudit is the oracle: the store's full list of events matching f
// with id <= upto, newest first.
func (h *harness) storeAudit(f store.AuditFilter, upto int64) []auditJSONRow {
	h.t.Helper()
	evs, err := h.db.AuditEvents(context.Background(), f, upto+1, 1_000_000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []auditJSONRow
	for _, e := range evs {
		out = append(out, auditRowOf(e))
	}
	return out
}

// TestAPIAuditPagesEveryEventOnce: following next links returns every
// event of the store's list exactly once, newest first, with and without a
// filter, while the trail grows (each request appends its token.use event,
// newer than the first page); the stream returns every event after its
// cursor up to X-Audit-Upto, oldest first, one valid event a line.
func TestAPIAuditPagesEveryEventOnce(t *testing.T) {
	h := newHarness(t, false)
	for range 3 {
		h.fileAs(h.signIn("owner.red"), "red")
		h.fileAs(h.signIn("owner.blue"), "blue")
	}
	tok := h.newToken(h.signIn("reviewer"), workflow.TokenRead)
	for _, tc := range []struct {
		path string
		f    store.AuditFilter
	}{
		{"/api/v1/audit?limit=4", store.AuditFilter{}},
		{"/api/v1/audit?limit=2&team=red", store.AuditFilter{Team: "red"}},
		{"/api/v1/audit?limit=1&actor=owner.blue%40example.test&action=connection.create", store.AuditFilter{Actor: "owner.blue@example.test", Action: "connection.create"}},
	} {
		got := h.auditPages(tok, tc.path)
		if len(got) == 0 {
			t.Fatalf("%s: no events", tc.path)
		}
		want := h.storeAudit(tc.f, got[0].ID)
		if len(got) != len(want) {
			t.Errorf("%s: %d events over the pages, the store has %d", tc.path, len(got), len(want))
		}
		seen := map[int64]bool{}
		for i := range got {
			if seen[got[i].ID] {
				t.Errorf("%s: event %d twice", tc.path, got[i].ID)
			}
			seen[got[i].ID] = true
			if i < len(want) && got[i] != want[i] {
				t.Errorf("%s: event %d = %+v, the store has %+v", tc.path, i, got[i], want[i])
			}
		}
	}
	// The stream, by query and by Accept, from a cursor.
	all := h.storeAudit(store.AuditFilter{}, 1<<62)
	after := all[len(all)/2].ID
	for _, r := range []apiReq{
		{token: tok, path: "/api/v1/audit?stream=1&after=" + strconv.FormatInt(after, 10)},
		{token: tok, path: "/api/v1/audit?after=" + strconv.FormatInt(after, 10), headers: map[string]string{"Accept": mimeNDJSON}},
	} {
		resp, body := h.api(r)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != mimeNDJSON {
			t.Fatalf("GET %s = %d %s\n%s", r.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		upto, _ := strconv.ParseInt(resp.Header.Get("X-Audit-Upto"), 10, 64)
		var want []auditJSONRow
		for _, e := range h.storeAudit(store.AuditFilter{}, upto) {
			if e.ID > after {
				want = append([]auditJSONRow{e}, want...) // oldest first
			}
		}
		got := h.streamLines(body)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("GET %s: %d lines, the store has %d events after %d up to %d", r.path, len(got), len(want), after, upto)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("line %d = %+v, the store has %+v", i, got[i], want[i])
			}
		}
	}
	// Bad cursors and limits: problems naming the field.
	for _, p := range []string{"?limit=0", "?limit=101", "?before=x", "?after=5", "?stream=1&before=5", "?object=abc", "?stream=yes"} {
		if resp, _ := h.api(apiReq{token: tok, path: "/api/v1/audit" + p}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /api/v1/audit%s = %d, want 400", p, resp.StatusCode)
		}
	}
}

// streamLines reads an NDJSON body (h.api validated each line against the
// document's AuditEvent), refusing unknown fields.
func (h *harness) streamLines(body []byte) []auditJSONRow {
	h.t.Helper()
	if len(body) > 0 && body[len(body)-1] != '\n' {
		h.t.Error("the stream's last line is not ended")
	}
	var out []auditJSONRow
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var e auditJSONRow
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			h.t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestAPIAuditIsThePagesRoom: the API's trail is for whom the /audit page
// is (admins, reviewers); every team member's and finance's token, and an
// admin's token limited to a team (it keeps no portal-wide role), are
// refused, page and stream, with nothing of any team's events.
func TestAPIAuditIsThePagesRoom(t *testing.T) {
	h := newHarness(t, false)
	h.fileAs(h.signIn("owner.red"), "red")
	h.fileAs(h.signIn("owner.blue"), "blue")
	for who, tok := range map[string]string{
		"owner.blue":            h.newToken(h.signIn("owner.blue"), workflow.TokenReadWrite),
		"member.red":            h.newToken(h.signIn("member.red"), workflow.TokenRead),
		"finance":               h.newToken(h.signIn("finance"), workflow.TokenRead),
		"revadmin, red only":    h.newToken(h.signIn("revadmin"), workflow.TokenRead, "red"),
		"revadmin rw, red only": h.newToken(h.signIn("revadmin"), workflow.TokenReadWrite, "red"),
	} {
		for _, p := range []string{"/api/v1/audit", "/api/v1/audit?team=blue", "/api/v1/audit?stream=1", "/api/v1/audit?team=red&stream=1"} {
			resp, body := h.api(apiReq{token: tok, path: p})
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s GET %s = %d, want 403", who, p, resp.StatusCode)
			}
			if bytes.Contains(body, []byte("connection.create")) || bytes.Contains(body, []byte(`"hash"`)) {
				t.Errorf("%s GET %s leaks events:\n%s", who, p, body)
			}
		}
		// The page says the same.
	}
	for _, who := range []string{"owner.blue", "member.red", "finance"} {
		if resp, _ := h.get(h.signIn(who).c, "/audit"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s GET /audit = %d, the API's refusal no longer matches the page", who, resp.StatusCode)
		}
	}
	for _, who := range []string{"admin", "reviewer", "revadmin"} {
		_, body := h.api(apiReq{token: h.newToken(h.signIn(who), workflow.TokenRead), path: "/api/v1/audit?limit=100"})
		if !bytes.Contains(body, []byte(`"team":"red"`)) || !bytes.Contains(body, []byte(`"team":"blue"`)) {
			t.Errorf("%s's unlimited token does not see both teams' events:\n%s", who, body)
		}
	}
	// A browser session reads as the page does.
	if resp, body := h.api(apiReq{client: h.signIn("reviewer").c, path: "/api/v1/audit"}); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"items"`) {
		t.Errorf("reviewer's session GET /api/v1/audit = %d", resp.StatusCode)
	}
}
