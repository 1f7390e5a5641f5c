package web

import (
	"reflect"
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
			want := map[string][]string{}
			var order []string
			for _, m := range usage.Methods {
				in.Policy = usage.Policy{Method: m, OverheadBasisPoints: 750}
				cb, err := usage.Charge(in)
				if err != nil {
					t.Fatal(err)
				}
				for _, tc := range cb.Teams {
					if want[tc.Team] == nil {
						order = append(order, tc.Team)
					}
					want[tc.Team] = append(want[tc.Team], tc.Total.String())
				}
				want["Unallocated (platform cost)"] = append(want["Unallocated (platform cost)"], cb.Unallocated.String())
			}
			order = append(order, "Unallocated (platform cost)")
			var wantRows []views.PreviewRow
			for _, team := range order {
				wantRows = append(wantRows, views.PreviewRow{Team: team, Amounts: want[team]})
			}
			if len(wantRows) < 3 || !reflect.DeepEqual(pv.Rows, wantRows) {
				t.Errorf("preview rows = %v, want %v", pv.Rows, wantRows)
			}
		})
	}
}
