package e2e

import (
	"strings"
	"testing"
)

// TestOwnerSeesNotifications: the admin sends team red's request back; the
// owner sees the notice in the header of every page and on
// /notifications, follows it to the connection and marks it read.
func TestOwnerSeesNotifications(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t)

	// Recipients are resolved when a notice is delivered, from the users
	// the portal knows: the admin signs in before the request is submitted,
	// or the submission's notice may be delivered before the portal knows
	// any admin (the delivery worker runs beside the server).
	admin := signIn(t, b, p, "Ada Admin")
	owner := signIn(t, b, p, "Olivia Owner (Red)")
	if n := count(t, owner.GetByTestId("unread-count"), "the unread count"); n != 0 {
		t.Errorf("a new owner has an unread count")
	}
	clickTo(t, owner, owner.GetByTestId("nav-team-red"), "**/teams/red", "open team red")
	clickTo(t, owner, owner.GetByTestId("new-request"), "**/teams/red/connections/new", "new request")
	clickTo(t, owner, owner.GetByTestId("use-example"), "**/teams/red/connections/new?example=1", "start from the example")
	mustOK(t, owner.Locator("#account_id").Fill("111122223333"), "fill the account id")
	clickTo(t, owner, owner.GetByTestId("save-submit"), "**/connections/1", "save and submit")

	_, err := admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens request 1")
	mustOK(t, admin.Locator("#reason").Fill("Name the cost centre in the purpose."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("request-changes"), "**/connections/1", "request changes")

	// The delivery worker runs beside the server: wait for it to have
	// delivered the change request in the app.
	waitForLog(t, p, "kind=connection.request_changes")
	_, err = owner.Reload()
	mustOK(t, err, "owner reloads")
	if got := text(t, owner, "unread-count"); got != "1" {
		t.Errorf("owner's header unread count = %q, want 1", got)
	}
	screenshot(t, owner, "60-unread-in-header")
	clickTo(t, owner, owner.GetByTestId("nav-notifications"), "**/notifications", "open the notifications")
	if got := text(t, owner, "notification-subject"); !strings.Contains(got, "was sent back for changes: Name the cost centre") {
		t.Errorf("notification = %q", got)
	}
	screenshot(t, owner, "61-notifications")
	clickTo(t, owner, owner.GetByTestId("mark-read"), "**/notifications", "mark it read")
	if n := count(t, owner.GetByTestId("unread-count"), "the unread count"); n != 0 {
		t.Errorf("the header still counts unread notifications after marking read")
	}
	if n := count(t, owner.GetByTestId("notification-unread"), "unread notifications"); n != 0 {
		t.Errorf("%d notifications still unread", n)
	}
	clickTo(t, owner, owner.GetByTestId("notification-link"), "**/connections/1", "follow it to the connection")
	if got := text(t, owner, "connection-state"); got != "Changes requested" {
		t.Errorf("state = %q", got)
	}
	// The admin has the submission's notice, not the owner's.
	_, err = admin.Goto(p.URL + "/notifications")
	mustOK(t, err, "admin opens notifications")
	if got := text(t, admin, "notifications"); !strings.Contains(got, "waits for approval") || strings.Contains(got, "sent back") {
		t.Errorf("admin's notifications = %q", got)
	}
}
