package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestOwnerSeesTeamUsage: in `make run` (--dev) the portal seeds demo
// usage; owner.red opens the team's usage from the home card and sees the
// charts drawn in the browser, labelled demo data; owner.blue gets 404 on
// red's usage.
func TestOwnerSeesTeamUsage(t *testing.T) {
	t.Parallel()
	b := browser(t)
	p := startPortal(t, "--demo-usage")
	// The demo usage is seeded in the background after start.
	waitForLog(t, p, "demo usage seeded")

	pg := signIn(t, b, p, "Olivia Owner (Red)")
	clickTo(t, pg, pg.GetByTestId("card-team-red-usage"), p.URL+"/teams/red/usage", "open red's usage from the home card")
	if got := text(t, pg, "demo-data"); !strings.Contains(got, "Demo data") {
		t.Errorf("demo label = %q", got)
	}
	// The SVG is in the page and has its accessible name.
	chart := pg.Locator(`[data-testid="usage-allocation"] svg[role="img"]`)
	if n := count(t, chart, "allocation charts"); n != 1 {
		t.Fatalf("%d allocation charts, want 1", n)
	}
	box, err := chart.BoundingBox()
	mustOK(t, err, "measure the chart")
	if box == nil || box.Width < 200 || box.Height < 50 {
		t.Errorf("the allocation chart is not drawn at a visible size: %+v", box)
	}
	if n := count(t, pg.Locator(`[data-testid="usage-allocation-s-alloc"] path.line`), "allocation lines"); n != 1 {
		t.Errorf("%d allocation lines, want 1", n)
	}
	if n := count(t, pg.Locator(`[data-testid="usage-hours"] rect.s-borrowed`), "borrowed bars"); n == 0 {
		t.Error("the demo shows no borrowed hours")
	}
	if got := text(t, pg, "missing-periods"); !strings.Contains(got, "Missing data periods") {
		t.Errorf("missing periods = %q", got)
	}
	if got := text(t, pg, "quota-suggestion"); !strings.Contains(got, "ml.p5.48xlarge") || !strings.Contains(got, "95th percentile") {
		t.Errorf("quota suggestion = %q", got)
	}
	screenshot(t, pg, "usage-01-team-red")

	blue := signIn(t, b, p, "Bianca Owner (Blue)")
	resp, err := blue.Goto(p.URL + "/teams/red/usage")
	mustOK(t, err, "owner.blue opens red's usage")
	if resp.Status() != 404 {
		t.Errorf("red's usage for owner.blue = %d, want 404", resp.Status())
	}
	screenshot(t, blue, "usage-02-blue-not-found")
}

// waitForLog waits until the portal has logged a line containing msg (an
// event, not a timing: the bound only keeps a broken build from hanging).
func waitForLog(t *testing.T, p *portal, msg string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(p.out.String(), msg) {
			return
		}
	}
	t.Fatalf("the portal never logged %q:\n%s", msg, p.out.String())
}
