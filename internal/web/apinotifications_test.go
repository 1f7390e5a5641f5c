package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/notify"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// notificationPages follows GET path's next links with token and returns
// the ids of every notification of every page, in order.
func (h *harness) notificationPages(token, path string) []int64 {
	h.t.Helper()
	var ids []int64
	for pages := 0; path != ""; pages++ {
		if pages > 100 {
			h.t.Fatal("the next links do not end")
		}
		resp, body := h.api(apiReq{token: token, path: path})
		if resp.StatusCode != http.StatusOK {
			h.t.Fatalf("GET %s = %d\n%s", path, resp.StatusCode, body)
		}
		var pg struct {
			Items []apiNotification
			Next  string
		}
		if err := json.Unmarshal(body, &pg); err != nil {
			h.t.Fatal(err)
		}
		for _, n := range pg.Items {
			ids = append(ids, n.ID)
		}
		path = pg.Next
	}
	return ids
}

var reMarkRead = regexp.MustCompile(`action="/notifications/(\d+)/read"`)

// TestAPINotificationsAreThePersonsOwn: the list is the notifications
// page's (every unread notice it offers to mark read, each once over the
// pages, newest first); a token limited to red leaves out a notice about
// blue addressed to its person by name; nobody else lists or marks them
// (404, and they stay unread); a read token cannot mark (403), a
// read-write one can, again without harm; a browser session cannot.
func TestAPINotificationsAreThePersonsOwn(t *testing.T) {
	h := newHarness(t, false)
	ctx := t.Context()
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create = %d\n%s", resp.StatusCode, body)
	}
	h.mustPost(admin, "/connections/1/decide", h.decision("request_changes", 1))
	w := &notify.Worker{DB: h.db, Resolve: auth.DevMapping().Resolve, Now: h.srv.opts.Now}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	uid := ownerID(t, h, "owner.red")
	// More of red's owner's notices, as delivery writes them (the outbox
	// row, then the person's): about red, about no team, and one about
	// blue addressed to them by name (as a signal's owner gets one), which
	// is theirs but outside a token limited to red.
	for i, n := range []struct{ team, recipients string }{{"red", "team"}, {"", "admins"}, {"red", "team"}, {"blue", string(workflow.ToPerson("owner.red@example.test"))}, {"red", "team"}} {
		personal := map[bool]int{false: 0, true: 1}[n.team == "blue"]
		if err := h.db.ExecForTest(ctx,
			fmt.Sprintf(`INSERT INTO outbox (team, kind, recipients, subject, created_at) VALUES ('%s', 'k', '%s', 'notice %d', '2026-01-01T09:00:00Z')`, n.team, n.recipients, i),
			fmt.Sprintf(`INSERT INTO notifications (user_id, outbox_id, kind, subject, created_at, team, personal) VALUES (%d, (SELECT max(id) FROM outbox), 'k', 'notice %d', '2026-01-01T09:00:00Z', '%s', %d)`, uid, i, n.team, personal)); err != nil {
			t.Fatal(err)
		}
	}
	_, page := h.get(owner.c, "/notifications")
	var want []int64 // the page's, newest first
	for _, m := range reMarkRead.FindAllStringSubmatch(page, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		want = append(want, id)
	}
	all, err := h.db.Notifications(ctx, uid, workflow.NoticeScope{AllTeams: true}, 100)
	if err != nil || len(want) != len(all) || len(want) < 4 {
		t.Fatalf("the page offers %v, the store holds %d (%v)", want, len(all), err)
	}
	read, rw := h.newToken(owner, workflow.TokenRead), h.newToken(owner, workflow.TokenReadWrite)
	if got := h.notificationPages(read, "/api/v1/notifications?limit=3"); !slices.Equal(got, want) {
		t.Errorf("the API's pages list %v, the page %v", got, want)
	}
	blueNotice := all[slices.IndexFunc(all, func(n store.Notification) bool { return n.Team == "blue" })].ID
	redOnly := h.newToken(owner, workflow.TokenReadWrite, "red")
	if got := h.notificationPages(redOnly, "/api/v1/notifications"); slices.Contains(got, blueNotice) || len(got) != len(want)-1 {
		t.Errorf("a token limited to red lists %v (the notice about blue is %d)", got, blueNotice)
	}
	mark := func(tok string, id int64) int {
		resp, _ := h.api(apiReq{token: tok, method: http.MethodPost, path: fmt.Sprintf("/api/v1/notifications/%d/read", id)})
		return resp.StatusCode
	}
	// Nobody else's.
	for who, tok := range map[string]string{"admin": h.newToken(admin, workflow.TokenReadWrite), "owner.blue": h.newToken(h.signIn("owner.blue"), workflow.TokenReadWrite)} {
		if got := h.notificationPages(tok, "/api/v1/notifications"); slices.ContainsFunc(got, func(id int64) bool { return slices.Contains(want, id) }) {
			t.Errorf("%s lists owner.red's notifications: %v", who, got)
		}
		for _, id := range want {
			if code := mark(tok, id); code != http.StatusNotFound {
				t.Errorf("%s marks owner.red's notification %d = %d, want 404", who, id, code)
			}
		}
	}
	if code := mark(redOnly, blueNotice); code != http.StatusNotFound {
		t.Errorf("a token limited to red marks the notice about blue = %d, want 404", code)
	}
	if code := mark(read, want[0]); code != http.StatusForbidden {
		t.Errorf("a read token marks = %d, want 403", code)
	}
	if resp, _ := h.api(apiReq{client: owner.c, method: http.MethodPost, path: fmt.Sprintf("/api/v1/notifications/%d/read", want[0])}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a session marks through the API = %d, want 403", resp.StatusCode)
	}
	for _, p := range []string{"/api/v1/notifications/0/read", "/api/v1/notifications/x/read", "/api/v1/notifications?limit=0", "/api/v1/notifications?before=x"} {
		method := http.MethodPost
		if p[len(p)-4:] != "read" {
			method = http.MethodGet
		}
		if resp, _ := h.api(apiReq{token: rw, method: method, path: p}); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s = %d, want 404 or 400", method, p, resp.StatusCode)
		}
	}
	if n, _ := h.db.UnreadNotifications(ctx, uid, workflow.NoticeScope{AllTeams: true}); n != len(want) {
		t.Fatalf("refused marks changed something: %d unread of %d", n, len(want))
	}
	// The person's read-write token marks; again is no error.
	for range 2 {
		if code := mark(rw, want[0]); code != http.StatusNoContent {
			t.Errorf("owner's read-write token marks = %d, want 204", code)
		}
	}
	if n, _ := h.db.UnreadNotifications(ctx, uid, workflow.NoticeScope{AllTeams: true}); n != len(want)-1 {
		t.Errorf("after marking one read: %d unread of %d", n, len(want))
	}
	_, body := h.api(apiReq{token: read, path: "/api/v1/notifications?limit=1"})
	if var1 := (struct{ Items []apiNotification }{}); json.Unmarshal(body, &var1) != nil || len(var1.Items) != 1 || !var1.Items[0].Read {
		t.Errorf("the newest notification is not read in the list:\n%s", body)
	}
}
