package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// seedUsage records 30 days of demo usage before now: red holds 20 GPUs of
// ml.p5.48xlarge every hour (4 borrowed above 16), blue 4; a 3-hour
// missing period two days ago without rows; the cluster offers 64 GPUs,
// with one node unhealthy for one hour.
// frozenClock stops the portal's clock at the harness's start: the usage
// tests seed hours up to "now" and compute their expected totals from it, so
// an hour turning between seeding and the request must not move the page's
// period.
func frozenClock(o *Options) {
	at := time.Now()
	o.Now = func() time.Time { return at }
}

func seedUsage(t *testing.T, h *harness) {
	t.Helper()
	ctx := t.Context()
	end := usage.HourStart(h.srv.opts.Now())
	miss := usage.Missing{Cluster: "shared-hp", From: end.Add(-48 * time.Hour), To: end.Add(-45 * time.Hour), Reason: "collector down (test)"}
	var rows []usage.Hour
	var cluster []usage.ClusterHour
	for at := end.Add(-30 * 24 * time.Hour); at.Before(end); at = at.Add(time.Hour) {
		if miss.Overlaps(at, at.Add(time.Hour)) {
			continue
		}
		rows = append(rows,
			usage.Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at,
				GuaranteedAccelSeconds: 16 * 3600, BorrowedAccelSeconds: 4 * 3600, Running: 3, Pending: 1, Preempted: 0,
				WaitP50Seconds: 60, WaitP90Seconds: 120, WaitP99Seconds: 300, Source: usage.SourceDemo},
			usage.Hour{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at,
				GuaranteedAccelSeconds: 4 * 3600, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceDemo})
		ch := usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at, CapacityAccelSeconds: 64 * 3600,
			AllocatedAccelSeconds: 24 * 3600, Source: usage.SourceDemo}
		if at.Equal(end.Add(-time.Hour)) {
			ch.UnhealthyNodeSeconds = 3600
		}
		cluster = append(cluster, ch)
	}
	rows[len(rows)-2].Preempted = 2
	if err := h.db.PutUsageHours(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := h.db.PutClusterHours(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	if err := h.db.AddMissing(ctx, miss); err != nil {
		t.Fatal(err)
	}
}

// periodHours is how many seeded hours the default period (29 days and
// today up to the last complete hour) holds, less the 3 missing.
func periodHours(h *harness) int64 {
	now := h.srv.opts.Now()
	return int64(usage.HourStart(now).Sub(usage.DayStart(now).AddDate(0, 0, -29))/time.Hour) - 3
}

// The team usage page: the team's owners and members, finance, admins and
// reviewers see it; another team's owner gets 404 and none of it.
func TestTeamUsagePageScoping(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	seedUsage(t, h)
	n := periodHours(h)
	for _, u := range []string{"owner.red", "member.red", "finance", "admin", "reviewer"} {
		resp, body := h.get(noRedirect(h.signIn(u).c), "/teams/red/usage")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s GET /teams/red/usage = %d, want 200", u, resp.StatusCode)
			continue
		}
		for _, want := range []string{
			`data-testid="usage-allocation"`, `<svg class="chart-svg"`, `data-testid="usage-hours"`, `data-testid="demo-data"`,
			`data-testid="missing-periods"`, "collector down (test)", `data-testid="utilization-note"`, "--prometheus-url",
			`data-testid="suggestion-ml.p5.48xlarge"`, `data-testid="suggested">3</strong>`,
			`data-testid="preemptions">2</dd>`, `data-testid="peak-running">3</dd>`,
			fmt.Sprintf(`data-testid="guaranteed-hours">%d.00</dd>`, 16*n), fmt.Sprintf(`data-testid="borrowed-hours">%d.00</dd>`, 4*n),
			"1m0s", "5m0s",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the usage page lacks %s", u, want)
			}
		}
		if strings.Contains(body, "hyperpod-ns-blue") {
			t.Errorf("%s: red's usage page shows blue's rows", u)
		}
	}
	for _, u := range []string{"owner.blue"} {
		resp, body := h.get(noRedirect(h.signIn(u).c), "/teams/red/usage")
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "usage-allocation") || strings.Contains(body, "hyperpod-ns-red") {
			t.Errorf("%s GET /teams/red/usage = %d, want 404 without red's usage", u, resp.StatusCode)
		}
	}
	// The team home and the home card link it.
	owner := h.signIn("owner.red")
	if _, body := h.get(owner.c, "/teams/red"); !strings.Contains(body, `href="/teams/red/usage" data-testid="team-usage-link"`) {
		t.Error("the team home does not link the usage page")
	}
	if _, body := h.get(owner.c, "/"); !strings.Contains(body, `href="/teams/red/usage" data-testid="card-team-red-usage"`) {
		t.Error("the home card does not link the usage page")
	}
}

// Bad period parameters re-render the page with the message beside the
// form and the input kept: 400, never 500.
func TestUsagePeriodValidation(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	today := usage.DayStart(h.srv.opts.Now())
	for _, path := range []string{"/teams/red/usage", "/admin/usage"} {
		s := h.signIn("admin")
		for _, tc := range []struct {
			query, testID, kept string
		}{
			{"from=yesterday", "error-from", `value="yesterday"`},
			{"to=2026-13-01", "error-to", `value="2026-13-01"`},
			{"from=" + today.AddDate(0, 0, 3).Format(time.DateOnly), "error-from", "is in the future"},
			{"from=2026-01-10&to=2026-01-01", "error-period", "ends (2026-01-01) before it starts (2026-01-10)"},
			{"from=2020-01-01&to=2022-01-01", "error-period", "at most 366 days"},
		} {
			resp, body := h.get(noRedirect(s.c), path+"?"+tc.query)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-testid="`+tc.testID+`"`) || !strings.Contains(body, tc.kept) {
				t.Errorf("GET %s?%s = %d; want 400 with %s and %q", path, tc.query, resp.StatusCode, tc.testID, tc.kept)
			}
		}
		// A valid period, and the default.
		for _, q := range []string{"", "from=" + today.AddDate(0, 0, -6).Format(time.DateOnly) + "&to=" + today.Format(time.DateOnly), "to=" + today.Format(time.DateOnly)} {
			if resp, body := h.get(noRedirect(s.c), path+"?"+q); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="usage-empty"`) {
				t.Errorf("GET %s?%s = %d, want 200 with the empty state", path, q, resp.StatusCode)
			}
		}
	}
}

// Issue 38 item 5: a period that reaches the hour in progress says on the
// page that the figures stop at that hour's start (the period's label ends
// there too); a period in the past says nothing of it.
func TestUsagePagesSayUpToWhen(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	now := h.srv.opts.Now()
	cur := usage.HourStart(now)
	past := usage.DayStart(now).AddDate(0, 0, -10).Format(time.DateOnly)
	s := h.signIn("admin")
	for _, path := range []string{"/teams/red/usage", "/admin/usage"} {
		_, body := h.get(noRedirect(s.c), path)
		want := `data-testid="figures-up-to">Figures run to ` + cur.Format("2006-01-02 15:04") + " UTC"
		if !strings.Contains(body, want) || !strings.Contains(body, "to "+cur.Format("2006-01-02 15:04")+" (UTC)") ||
			!strings.Contains(body, "the hour in progress (from "+cur.Format("15:04")+") is still being recorded") {
			t.Errorf("GET %s: the page does not say that its figures run to %s", path, cur)
		}
		if _, body := h.get(noRedirect(s.c), path+"?from="+past+"&to="+past); strings.Contains(body, `data-testid="figures-up-to"`) {
			t.Errorf("GET %s for %s: a past period says its figures stop at the hour in progress", path, past)
		}
	}
}

func TestClusterUsageOverview(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	seedUsage(t, h)
	n := periodHours(h)
	admin := h.signIn("admin")
	resp, body := h.get(noRedirect(admin.c), "/admin/usage")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin GET /admin/usage = %d", resp.StatusCode)
	}
	for _, want := range []string{
		`data-testid="cluster-stacked"`, `class="series s-idle"`, `data-testid="demo-data"`, `data-testid="missing-periods"`,
		// capacity 64 per hour, 40 idle (62 %).
		fmt.Sprintf("%d.00 accelerator-hours", 64*n), fmt.Sprintf(`data-testid="idle">%d.00 accelerator-hours (62%% of capacity)`, 40*n),
		// No approved connection: red and blue hold only borrowed capacity.
		`data-testid="status-red">above its guarantee`, `data-testid="status-blue">above its guarantee`,
		`data-testid="unhealthy"`, "1.00 nodes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the cluster overview lacks %s", want)
		}
	}
	if _, body := h.get(admin.c, "/admin"); !strings.Contains(body, `href="/admin/usage"`) {
		t.Error("the admin queue does not link the cluster overview")
	}
}

// A change to the guarantee shows the approving admin the quota suggestion
// beside the change; the team page shows the approved guarantee.
func TestQuotaSuggestionOnTheApprovalOfAGuaranteeChange(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	activeConnection(t, h, owner, admin)
	seedUsage(t, h)
	if _, body := h.get(owner.c, "/teams/red/usage"); !strings.Contains(body, "2 × ml.p5.48xlarge = 16 accelerators") {
		t.Errorf("the usage page does not show the approved guarantee:\n%s", section(body, "guarantee"))
	}
	// A change that leaves the guarantee alone: no suggestion.
	same := changeForm(1, func(c *workflow.Contract) { c.BusinessPurpose += " (more)" })
	same.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/connections/1", same); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submitting a change = %d\n%s", resp.StatusCode, body)
	}
	if _, body := h.get(admin.c, "/connections/1"); !strings.Contains(body, `data-testid="decide-form"`) || strings.Contains(body, `data-testid="quota-suggestion"`) {
		t.Error("a change that keeps the guarantee shows a quota suggestion (or no decision form)")
	}
	h.postAs(owner, "/connections/1/withdraw", nil)
	more := changeForm(1, func(c *workflow.Contract) {
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 4}}
	})
	more.Set("intent", "submit")
	more.Set("base_version", "2")
	if resp, body := h.postAs(owner, "/connections/1", more); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submitting the guarantee change = %d\n%s", resp.StatusCode, body)
	}
	_, body := h.get(admin.c, "/connections/1")
	for _, want := range []string{`data-testid="quota-suggestion"`, `data-testid="suggested">3</strong>`, `data-testid="proposed">4</strong>`,
		"The current guarantee is 2: raising it to 3"} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval page lacks %s:\n%s", want, section(body, "decide"))
		}
	}
}

// busyFake is a utilization source for the seam's test: the Prometheus
// client (internal/usage/prom) is tested against a real Prometheus.
type busyFake struct{ err error }

func (f busyFake) NamespaceUtilization(_ context.Context, ns string, from, to time.Time, step time.Duration) ([]usage.Point, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []usage.Point
	if ns == "hyperpod-ns-red" {
		for h := from; h.Before(to); h = h.Add(step) {
			out = append(out, usage.Point{At: h, Percent: 50})
		}
	}
	return out, nil
}

func (f busyFake) NamespacesUtilization(context.Context, time.Time, time.Time, time.Duration) (map[string][]usage.Point, error) {
	return nil, errors.New("not used by the team page")
}

// With a utilization source the page draws busy accelerators and drops the
// "allocation only" note; when the source fails, it says so and shows
// allocation only (no 500).
func TestTeamUsageWithUtilization(t *testing.T) {
	for _, tc := range []struct {
		src           busyFake
		want, wantNot string
	}{
		{busyFake{}, `data-testid="usage-allocation-s-busy"`, `data-testid="utilization-note"`},
		{busyFake{err: errors.New("prometheus down")}, "could not be read from Prometheus", `data-testid="usage-allocation-s-busy"`},
	} {
		h := newHarness(t, false, frozenClock, func(o *Options) { o.Utilization = tc.src })
		seedUsage(t, h)
		resp, body := h.get(h.signIn("owner.red").c, "/teams/red/usage")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.want) || strings.Contains(body, tc.wantNot) {
			t.Errorf("utilization %+v: %d, want %s and not %s", tc.src, resp.StatusCode, tc.want, tc.wantNot)
		}
	}
}

// Issue 38 item 2: the usage chart's guarantee line is the guarantee in
// force in each hour, from the guarantee history the collector and the
// chargeback use: red's 1 p5 (8 GPUs) became 2 (16) at X+30m, so the hour
// before X shows 8, hour X the mean 12, the hour after 16.
func TestTeamUsageGuaranteeLineFollowsHistory(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	ctx := context.Background()
	x := usage.HourStart(h.srv.opts.Now()).Add(-5 * time.Hour)
	if err := h.db.ExecForTest(ctx, `INSERT INTO team_guarantee_history (team, instance_type, from_at, count) VALUES
  ('red', 'ml.p5.48xlarge', '0001-01-01T00:00:00.000000000Z', 1), ('red', 'ml.p5.48xlarge', '`+x.Add(30*time.Minute).Format(time.RFC3339)+`', 2)`); err != nil {
		t.Fatal(err)
	}
	u, err := h.srv.teamUsageView(ctx, "red", x.Add(-time.Hour), x.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(u.Allocation.Table.Columns, "Guarantee (accelerators)")
	var got []string
	for _, r := range u.Allocation.Table.Rows {
		got = append(got, r[col])
	}
	if want := []string{"8", "12", "16"}; col < 0 || !slices.Equal(got, want) {
		t.Errorf("guarantee line %v (column %d of %v), want %v", got, col, u.Allocation.Table.Columns, want)
	}
}

// The hour in progress: the period's totals leave it out, and the team
// page shows what the collector recorded of it so far apart, only when the
// period reaches it, and only the team's own rows.
func TestTeamUsageShowsTheHourInProgress(t *testing.T) {
	h := newHarness(t, false, frozenClock)
	s := h.signIn("owner.red")
	cur := usage.HourStart(h.srv.opts.Now())
	_, body := h.get(noRedirect(s.c), "/teams/red/usage")
	if !strings.Contains(body, `data-testid="hour-in-progress-empty"`) {
		t.Errorf("with nothing recorded, the page does not say the hour in progress is empty")
	}
	rows := []usage.Hour{
		{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: cur,
			GuaranteedAccelSeconds: 8 * 600, BorrowedAccelSeconds: 8 * 300, Running: 2, Pending: 1, Preempted: 1,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
		{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.g5.12xlarge", Start: cur,
			GuaranteedAccelSeconds: 4 * 900, Running: 1,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
		{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: cur,
			GuaranteedAccelSeconds: 8 * 3600, Preempted: 5,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
	}
	if err := h.db.PutUsageHours(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	_, body = h.get(noRedirect(s.c), "/teams/red/usage")
	for id, want := range map[string]string{
		"live-guaranteed-hours": hoursText(8*600 + 4*900), "live-borrowed-hours": hoursText(8 * 300),
		"live-running": "3", "live-pending": "1", "live-preemptions": "1",
	} {
		if !strings.Contains(body, `data-testid="`+id+`">`+want+"<") {
			t.Errorf("%s: want %s (red's rows only) in the hour in progress", id, want)
		}
	}
	// The totals still stop at the hour's start.
	if !strings.Contains(body, `data-testid="preemptions">0<`) {
		t.Error("the period's preemptions count the hour in progress")
	}
	past := usage.DayStart(h.srv.opts.Now()).AddDate(0, 0, -3).Format(time.DateOnly)
	if _, body := h.get(noRedirect(s.c), "/teams/red/usage?from="+past+"&to="+past); strings.Contains(body, `data-testid="hour-in-progress`) {
		t.Error("a past period shows the hour in progress")
	}
}
