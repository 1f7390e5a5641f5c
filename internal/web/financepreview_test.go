package web

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/views"
)

// The policy preview equals chargebacks computed separately, one per
// method, from every hourly row of its basis (store.CostInput): last month
// when it has usage, else this month to date (which the page has already
// loaded and hands to the preview).
func TestFinancePreviewEqualsSeparateChargebacks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lastMonth bool
	}{{"last month", true}, {"this month to date", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false, withRateCard(t))
			ctx := t.Context()
			now := h.srv.opts.Now()
			month, toDate := monthToDate(now)
			last := usage.MonthOf(month.From.Add(-time.Hour))
			starts := []time.Time{month.From}
			basis := toDate
			if tc.lastMonth {
				starts, basis = append(starts, last.From, last.From.Add(50*time.Hour)), last
			}
			for i, at := range starts {
				if err := h.db.PutUsageHours(ctx, []usage.Hour{
					{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: int64(8-i) * 3600, BorrowedAccelSeconds: 1234},
					{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: int64(3+i) * 3600, Source: usage.SourceDemo},
				}); err != nil {
					t.Fatal(err)
				}
				if err := h.db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
					CapacityAccelSeconds: 32 * 3600, AllocatedAccelSeconds: 12 * 3600}}); err != nil {
					t.Fatal(err)
				}
			}
			_, _, pol, v, err := h.srv.monthSoFar(ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			pv, err := h.srv.preview(ctx, now, pol.Policy, views.PolicyForm{Overhead: "7.5"}, v.in)
			if err != nil {
				t.Fatal(err)
			}
			in, _, err := h.db.CostInput(ctx, basis)
			if err != nil {
				t.Fatal(err)
			}
			in.Rates, in.Accelerators = h.srv.opts.RateCard, h.srv.accelerators()
			wantRows := previewOracle(t, in, 750)
			if len(wantRows) < 3 || !reflect.DeepEqual(pv.Rows, wantRows) {
				t.Errorf("preview rows = %v, want %v", pv.Rows, wantRows)
			}
		})
	}
}

// previewOracle computes the preview's rows from separate chargebacks of
// in, one per method: each team's total, then the rest of the cluster's
// cost from the totals themselves (cluster cost minus the teams' charges):
// platform cost when it is zero or more, else the premium the teams paid
// above cost, in a row of its own present only when a method has one.
func previewOracle(t *testing.T, in usage.ChargeInput, overhead int) []views.PreviewRow {
	t.Helper()
	want := map[string][]string{}
	var order []string
	premium := false
	for _, m := range usage.Methods {
		in.Policy = usage.Policy{Method: m, OverheadBasisPoints: overhead}
		cb, err := usage.Charge(in)
		if err != nil {
			t.Fatal(err)
		}
		rest := cb.ClusterCost.Minor
		for _, tc := range cb.Teams {
			if want[tc.Team] == nil {
				order = append(order, tc.Team)
			}
			want[tc.Team] = append(want[tc.Team], tc.Total.String())
			rest -= tc.Total.Minor
		}
		if rest >= 0 {
			want["platform"] = append(want["platform"], usage.Money{Minor: rest, Currency: cb.Currency}.String())
			want["premium"] = append(want["premium"], "—")
		} else {
			want["platform"] = append(want["platform"], "—")
			want["premium"] = append(want["premium"], usage.Money{Minor: -rest, Currency: cb.Currency}.String())
			premium = true
		}
	}
	var rows []views.PreviewRow
	for _, team := range order {
		rows = append(rows, views.PreviewRow{Team: team, Amounts: want[team]})
	}
	rows = append(rows, views.PreviewRow{Team: "Unallocated (platform cost)", Amounts: want["platform"]})
	if premium {
		rows = append(rows, views.PreviewRow{Team: "Premium collected above cost", Amounts: want["premium"]})
	}
	return rows
}

// TestFinancePreviewNamesPremiumAboveCost: when borrowed hours at the rate
// card's premium rate make the teams' charges exceed the cluster's cost
// (red borrows the idle capacity at 120.00 an hour that costs 98.32), the
// page shows no negative platform cost: the difference is a row "Premium
// collected above cost", equal to the teams' charges minus the cluster's
// cost, explained beside the table and in the month-to-date line.
func TestFinancePreviewNamesPremiumAboveCost(t *testing.T) {
	h := newHarness(t, false, withRateCard(t))
	ctx := t.Context()
	now := h.srv.opts.Now()
	month := usage.MonthOf(now)
	for _, at := range []time.Time{month.From, month.From.Add(time.Hour)} {
		if err := h.db.PutUsageHours(ctx, []usage.Hour{
			{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 4 * 3600, BorrowedAccelSeconds: 10 * 3600},
			{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 2 * 3600},
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.db.PutClusterHours(ctx, []usage.ClusterHour{{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
			CapacityAccelSeconds: 16 * 3600, AllocatedAccelSeconds: 16 * 3600}}); err != nil {
			t.Fatal(err)
		}
	}
	_, toDate, pol, v, err := h.srv.monthSoFar(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := h.srv.preview(ctx, now, pol.Policy, views.PolicyForm{Overhead: "0"}, v.in)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := h.db.CostInput(ctx, toDate)
	if err != nil {
		t.Fatal(err)
	}
	in.Rates, in.Accelerators = h.srv.opts.RateCard, h.srv.accelerators()
	want := previewOracle(t, in, 0)
	if want[len(want)-1].Team != "Premium collected above cost" {
		t.Fatalf("the data gives no premium above cost under any method: %v", want)
	}
	if !reflect.DeepEqual(pv.Rows, want) || pv.PremiumNote == "" {
		t.Errorf("preview rows = %v (note %q), want %v", pv.Rows, pv.PremiumNote, want)
	}
	for _, r := range pv.Rows {
		for _, a := range r.Amounts {
			if strings.HasPrefix(a, "-") {
				t.Errorf("row %q shows a negative amount %s", r.Team, a)
			}
		}
	}
	// The page: the row, its explanation, and the month to date's line
	// under the policy in force (its premium from the teams' totals).
	fin := h.signIn("finance")
	_, body := h.get(fin.c, "/finance")
	in.Policy = pol.Policy
	cb, err := usage.Charge(in)
	if err != nil {
		t.Fatal(err)
	}
	above := -cb.ClusterCost.Minor
	for _, tc := range cb.Teams {
		above += tc.Total.Minor
	}
	for _, s := range []string{"Premium collected above cost", `data-testid="preview-premium-note"`, `data-testid="finance-premium-note"`,
		`<strong data-testid="finance-premium">` + usage.Money{Minor: above, Currency: cb.Currency}.String() + `</strong>`} {
		if !strings.Contains(body, s) {
			t.Errorf("/finance lacks %q", s)
		}
	}
	if above <= 0 || strings.Contains(body, `data-testid="finance-unallocated"`) {
		t.Errorf("month to date: premium %d, or a platform cost shown beside it", above)
	}
}
