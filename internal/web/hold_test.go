package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestHoldPanel: a proposed hold shows on the connection's page to those
// who see it and waits in the admin queue; an independent admin confirms
// it (a hold job is queued), escalates it to hold-and-drain only with the
// team's name typed, and releases it; a missing reason or confirmation
// comes back on the form with the input kept; the team's owner, an admin
// who owns the team and the oversight roles take no step, another team's
// owner gets 404, and the CSRF token is required.
func TestHoldPanel(t *testing.T) {
	h := newHarness(t, false)
	ctx := t.Context()
	owner, member, blue, admin, reviewer, finance, ownadmin := h.signIn("owner.red"), h.signIn("member.red"), h.signIn("owner.blue"),
		h.signIn("admin"), h.signIn("reviewer"), h.signIn("finance"), h.signIn("ownadmin")
	activeConnection(t, h, owner, admin)
	hold := func(s session, v url.Values) (*http.Response, string) { return h.postAs(s, "/connections/1/hold", v) }

	// No hold: no panel, and no step is possible.
	if _, body := h.get(admin.c, "/connections/1"); strings.Contains(body, `data-testid="hold"`) {
		t.Error("a hold panel without a hold")
	}
	if resp, _ := hold(admin, url.Values{"step": {"confirm"}, "reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("confirming nothing = %d, want 403", resp.StatusCode)
	}

	if _, err := h.db.ProposeHold(ctx, 1, workflow.SystemActor, "the contract's end date 2026-11-30 has passed", h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	_, page := h.get(admin.c, "/admin")
	if !strings.Contains(page, `data-testid="admin-holds"`) || !strings.Contains(page, "end date 2026-11-30") {
		t.Error("the admin queue does not list the proposed hold")
	}
	_, page = h.get(admin.c, "/connections/1")
	for _, want := range []string{`data-hold="proposed"`, `data-testid="hold-confirm"`, `data-testid="hold-decline"`, `action="/connections/1/hold"`, "system"} {
		if !strings.Contains(page, want) {
			t.Errorf("admin's page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-testid="hold-release"`) {
		t.Error("release offered for a proposal")
	}
	for name, s := range map[string]session{"owner.red": owner, "member.red": member, "reviewer": reviewer} {
		_, body := h.get(s.c, "/connections/1")
		if !strings.Contains(body, `data-hold="proposed"`) || strings.Contains(body, `data-testid="hold-form"`) {
			t.Errorf("%s: the panel is missing or offers steps", name)
		}
	}
	if _, body := h.get(ownadmin.c, "/connections/1"); strings.Contains(body, `data-testid="hold-form"`) || !strings.Contains(body, `data-testid="hold-note"`) {
		t.Error("an admin who owns the team is offered the steps, or not told why not")
	}
	for _, tc := range []struct {
		name string
		who  session
		want int
	}{{"owner.blue", blue, 404}, {"finance", finance, 404}, {"owner.red", owner, 403}, {"member.red", member, 403}, {"reviewer", reviewer, 403}, {"ownadmin", ownadmin, 403}} {
		if resp, _ := hold(tc.who, url.Values{"step": {"confirm"}, "reason": {"because"}}); resp.StatusCode != tc.want {
			t.Errorf("%s confirming = %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if resp, _ := h.post(noRedirect(admin.c), "/connections/1/hold", url.Values{"step": {"confirm"}, "reason": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without a CSRF token = %d, want 403", resp.StatusCode)
	}
	if resp, _ := hold(admin, url.Values{"step": {"pause"}, "reason": {"x"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown step = %d, want 400", resp.StatusCode)
	}
	resp, body := hold(admin, url.Values{"step": {"confirm"}, "reason": {"  "}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-hold"`) {
		t.Errorf("confirm without a reason = %d", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 1); c.Hold != workflow.HoldProposed {
		t.Fatalf("refused steps moved the hold to %q", c.Hold)
	}

	resp, _ = hold(admin, url.Values{"step": {"confirm"}, "reason": {"idle since March"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/connections/1" {
		t.Fatalf("confirm = %d", resp.StatusCode)
	}
	c, _ := h.db.Connection(ctx, 1)
	js, _ := h.db.JobsFor(ctx, 1)
	if c.Hold != workflow.HoldOn || js[0].Kind != workflow.JobHold || js[0].StopPolicy != workflow.StopHold {
		t.Errorf("after confirm: hold %q, job %+v", c.Hold, js[0])
	}
	if _, page := h.get(owner.c, "/connections/1"); !strings.Contains(page, "<h2>Setting the hold</h2>") || !strings.Contains(page, `data-hold="hold"`) {
		t.Error("the team's page does not show the hold job's progress under its own heading")
	}
	// The hold job fails: the progress panel offers to try it again,
	// through the hold route, with the stopPolicy the hold says.
	now := h.srv.opts.Now()
	j, ok, err := h.db.ClaimJob(ctx, "w", now, time.Minute)
	if err != nil || !ok || j.Kind != workflow.JobHold {
		t.Fatalf("claim = %+v, %v, %v", j, ok, err)
	}
	if err := h.db.FailJob(ctx, j.ID, "w", "the API server refused", now); err != nil {
		t.Fatal(err)
	}
	if _, page := h.get(admin.c, "/connections/1"); !strings.Contains(page, `action="/connections/1/hold?step=retry"`) {
		t.Error("no retry of the failed hold job")
	}
	if _, page := h.get(owner.c, "/connections/1"); strings.Contains(page, "step=retry") {
		t.Error("the owner is offered the hold job's retry")
	}
	if resp, _ := h.postAs(owner, "/connections/1/hold?step=retry", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the owner's retry = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/connections/1/hold?step=retry", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry = %d", resp.StatusCode)
	}
	js, _ = h.db.JobsFor(ctx, 1)
	if js[0].Kind != workflow.JobHold || js[0].State != workflow.JobQueued || js[0].StopPolicy != workflow.StopHold {
		t.Errorf("after the retry: %+v", js[0])
	}
	if resp, _ := h.postAs(admin, "/connections/1/hold?step=retry", nil); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second retry while one is queued = %d, want 409", resp.StatusCode)
	}
	if js2, _ := h.db.JobsFor(ctx, 1); len(js2) != len(js) {
		t.Error("a refused retry queued a job")
	}
	// Confirming again (a second tab) is refused, nothing written.
	if resp, body := h.postAs(h.signIn("admin2"), "/connections/1/hold", url.Values{"step": {"confirm"}, "reason": {"x"}}); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(body, "Nothing was changed") {
		t.Errorf("a second confirmation = %d, want 409", resp.StatusCode)
	}
	if js2, _ := h.db.JobsFor(ctx, 1); len(js2) != len(js) {
		t.Error("a refused confirmation queued a job")
	}

	// The drain needs the team's name typed; the page keeps the input.
	resp, body = hold(admin, url.Values{"step": {"drain"}, "reason": {"still running jobs"}, "confirm": {"blue"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "type the team&#39;s name") ||
		!strings.Contains(body, "still running jobs") || !strings.Contains(body, `value="blue"`) {
		t.Errorf("drain unconfirmed = %d", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 1); c.Hold != workflow.HoldOn {
		t.Fatalf("an unconfirmed drain moved the hold to %q", c.Hold)
	}
	if resp, _ := hold(admin, url.Values{"step": {"drain"}, "reason": {"still running jobs"}, "confirm": {"red"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drain = %d", resp.StatusCode)
	}
	if c, _ := h.db.Connection(ctx, 1); c.Hold != workflow.HoldDrain {
		t.Errorf("after drain: %q", c.Hold)
	}
	if resp, _ := hold(admin, url.Values{"step": {"release"}, "reason": {"renewed"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("release = %d", resp.StatusCode)
	}
	c, _ = h.db.Connection(ctx, 1)
	js, _ = h.db.JobsFor(ctx, 1)
	if c.Hold != workflow.HoldNone || js[0].StopPolicy != workflow.StopNone {
		t.Errorf("after release: hold %q, job %+v", c.Hold, js[0])
	}
	_, page = h.get(owner.c, "/connections/1")
	for _, want := range []string{"hold.confirm", "hold.drain", "hold.release", "idle since March"} {
		if !strings.Contains(page, want) {
			t.Errorf("the team's page lacks %q in its history", want)
		}
	}
}
