package web

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Issue 33: one month shows one figure per team everywhere money is shown:
// the finance page's month to date, the team's statement (computed while
// the month runs, then frozen when it closes), its CSV and JSON exports,
// and the review evidence's cost over the same days. Each is compared with
// an oracle charged from the rows as recorded (every hourly row, read back
// by the test: store.CostInput), at the policy and prices in force.
//
// November has 30 days: at 23:30 on the 30th the month to date is the
// whole month, and evidence collected at 00:30 on 1 December covers the
// same 30 days in its 30-day window.
func TestOneMonthOneFigureEverywhere(t *testing.T) {
	nov := usage.MonthOf(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	now := nov.To.Add(-30 * time.Minute)
	// A price change mid-month, so that the summed reads span it.
	card, err := usage.ParseRateCard([]byte(`{"currency": "USD", "rates": [
  {"instance_type": "ml.p5.48xlarge", "effective_from": "2025-01-01", "hourly": "98.32", "borrowed_hourly": "120.00"},
  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-11-15", "hourly": "101.17", "borrowed_hourly": "131.03"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Signed in at the real time (the identity provider's tokens carry
	// it), then the portal's clock stops in November's last hour.
	clk := newTestClock()
	h := newHarness(t, false, withClock(clk), func(o *Options) { o.RateCard = card })
	ctx := t.Context()
	activeRed(t, h)
	fin := h.signIn("finance")
	clk.Advance(now.Sub(clk.Now()))
	// Red's and blue's hours over the month, with idle capacity beside
	// them, so that the policy's idle and overhead shares count.
	for i, at := range []time.Time{nov.From, nov.From.Add(37 * time.Hour), nov.From.Add(15*24*time.Hour + 5*time.Hour), nov.To.Add(-time.Hour)} {
		if err := h.db.PutUsageHours(ctx, []usage.Hour{
			{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at,
				GuaranteedAccelSeconds: int64(8-i) * 3600, BorrowedAccelSeconds: int64(1000 + 777*i), CPUMilliSeconds: 5000 * 3600},
			{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: int64(3+i) * 3599},
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
			CapacityAccelSeconds: 32 * 3600, AllocatedAccelSeconds: 14 * 3600}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.db.SetCostPolicy(ctx, 0, usage.Policy{Method: usage.SplitByUsage, OverheadBasisPoints: 1250}, "usage pays",
		workflow.Actor{Email: "finance@example.test"}, now); err != nil {
		t.Fatal(err)
	}

	// The oracle: every recorded hourly row, charged at the policy in force.
	in, _, err := h.db.CostInput(ctx, nov)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := h.db.CostPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in.Rates, in.Accelerators, in.Policy = card, h.srv.accelerators(), pol.Policy
	oracle, err := usage.Charge(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, team := range []string{"red", "blue"} {
		tc := oracle.Team(team)
		if tc.Idle.Minor == 0 || tc.Overhead.Minor == 0 {
			t.Fatalf("%s's oracle charge %+v has no idle or overhead share: the figures would not tell the policy apart from direct cost", team, tc)
		}
		want[team] = tc.Total.Amount()
	}

	got := map[string]map[string]string{} // output -> team -> amount
	put := func(output, team, amount string) {
		if got[output] == nil {
			got[output] = map[string]string{}
		}
		got[output][team] = strings.TrimSuffix(amount, " USD")
	}
	_, body := h.get(fin.c, "/finance")
	for team := range want {
		m := regexp.MustCompile(`(?s)data-testid="finance-team-` + team + `">.*?<td><strong>([^<]*)</strong></td>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/finance has no to-date figure for %s", team)
		}
		put("finance page", team, html.UnescapeString(m[1]))
	}
	statements := func(label string) {
		for team := range want {
			u := "/teams/" + team + "/statements/2026-11"
			resp, page := h.get(fin.c, u)
			m := regexp.MustCompile(`data-testid="statement-total">([^<]*)<`).FindStringSubmatch(page)
			if resp.StatusCode != http.StatusOK || m == nil {
				t.Fatalf("%s statement page of %s = %d, no total", label, team, resp.StatusCode)
			}
			put(label+" statement page", team, html.UnescapeString(m[1]))
			_, csv := h.get(fin.c, u+"/csv")
			rows, err := usage.ParseStatementCSV(strings.NewReader(csv))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r["item"] == usage.ItemTotal {
					put(label+" CSV export", team, r["cost"])
				}
			}
			_, js := h.get(fin.c, u+"/json")
			var st usage.Statement
			if err := json.Unmarshal([]byte(js), &st); err != nil {
				t.Fatal(err)
			}
			put(label+" JSON export", team, st.Total)
		}
	}
	statements("computed")
	if closed, err := h.db.CloseMonth(ctx, nov, card, h.srv.accelerators(), nov.To.Add(3*time.Hour)); err != nil || !closed {
		t.Fatalf("CloseMonth = %v, %v", closed, err)
	}
	statements("frozen")

	sched := &review.Scheduler{DB: h.db, Rates: card, Accelerators: h.srv.accelerators()}
	conn, err := h.db.Connection(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := review.Collect(ctx, sched, conn, "", nov.To.Add(30*time.Minute))
	if err != nil || ev.Usage == nil {
		t.Fatalf("evidence = %+v, %v", ev.Usage, err)
	}
	put("review evidence (30 days)", "red", ev.Usage.Last30.Cost)

	if len(got) != 8 {
		t.Fatalf("collected %d outputs, want 8: %v", len(got), got)
	}
	for output, teams := range got {
		for team, amount := range teams {
			if amount != want[team] {
				t.Errorf("%s shows %s's November as %q; the recorded usage charges %s", output, team, amount, want[team])
			}
		}
	}
}
