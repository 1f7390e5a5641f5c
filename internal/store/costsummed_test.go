package store_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// A chargeback of the summed input equals the chargeback of every hourly
// row, under every policy, over periods that a rate change cuts (the
// borrowed premium too), with rows of both sources, an instance type
// without a rate, and hours outside the period.
func TestCostInputSummedChargesLikeHourly(t *testing.T) {
	db := openTB(t)
	ctx := t.Context()
	card, err := usage.ParseRateCard([]byte(`{"currency": "USD", "rates": [
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32", "borrowed_hourly": "120.00"},
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-11-10", "hourly": "91.07", "borrowed_hourly": "133.33"},
	  {"instance_type": "ml.trn1.32xlarge", "effective_from": "2026-11-20", "hourly": "21.50"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	accel := map[string]usage.InstanceAccel{"ml.p5.48xlarge": {Count: 8}, "ml.trn1.32xlarge": {Count: 32, Neuron: true}}
	var hours []usage.Hour
	var cluster []usage.ClusterHour
	start := nov.From.Add(-48 * time.Hour)
	for i := range (30 + 4) * 24 {
		at := start.Add(time.Duration(i) * time.Hour)
		var alloc int64
		for j, team := range []string{"red", "blue", "green"} {
			for k, it := range []string{"ml.p5.48xlarge", "ml.trn1.32xlarge", "ml.g5.12xlarge"} {
				if (i+j+k)%5 == 0 {
					continue
				}
				h := usage.Hour{Team: team, Namespace: "hyperpod-ns-" + team + []string{"", "-b"}[(i/100+j)%2], InstanceType: it, Start: at,
					GuaranteedAccelSeconds: int64((i*7+j*3+k)%9) * 1237, BorrowedAccelSeconds: int64((i*5+j+k)%4) * 611,
					CPUMilliSeconds: int64(i%13) * 7001, MemoryMiBSeconds: int64(j+1) * 3600}
				if (i/24+j)%3 == 0 {
					h.Source = usage.SourceDemo
				}
				alloc += h.AccelSeconds()
				hours = append(hours, h)
			}
		}
		cluster = append(cluster, usage.ClusterHour{Cluster: "shared-hp", InstanceType: "ml.p5.48xlarge", Start: at,
			CapacityAccelSeconds: 64 * 3600, AllocatedAccelSeconds: alloc % (64 * 3600)})
	}
	if err := db.PutUsageHours(ctx, hours); err != nil {
		t.Fatal(err)
	}
	if err := db.PutClusterHours(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	periods := []usage.Period{nov, {From: nov.From.Add(5 * time.Hour), To: nov.From.Add(22*24*time.Hour + 7*time.Hour)},
		{From: nov.From.Add(-30 * time.Hour), To: nov.From.Add(9*24*time.Hour + 3*time.Hour)}}
	for _, p := range periods {
		hourly, missing, err := db.CostInput(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		changes := card.Changes(p)
		summed, summedMissing, err := db.CostInputSummed(ctx, p, changes)
		if err != nil {
			t.Fatal(err)
		}
		if len(summed.Hours) >= len(hourly.Hours)/10 {
			t.Errorf("%s: summed input has %d rows for %d hourly rows", p.Label(), len(summed.Hours), len(hourly.Hours))
		}
		if !reflect.DeepEqual(missing, summedMissing) {
			t.Errorf("%s: missing periods differ", p.Label())
		}
		for _, m := range usage.Methods {
			for _, in := range []*usage.ChargeInput{&hourly, &summed} {
				in.Rates, in.Accelerators, in.Policy = card, accel, usage.Policy{Method: m, OverheadBasisPoints: 1250}
			}
			want, err := usage.Charge(hourly)
			if err != nil {
				t.Fatal(err)
			}
			got, err := usage.Charge(summed)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %s: summed chargeback differs:\n got %+v\nwant %+v", p.Label(), m, got, want)
			}
		}
	}
}

// The summed read takes its span through the hour index: it never walks
// all of history.
func TestCostInputSummedUsesHourIndex(t *testing.T) {
	db := openTB(t)
	plan := explain(t, db, store.SummedHoursSQL, "2026-11-01T00:00:00.000000000Z", "2026-12-01T00:00:00.000000000Z")
	joined := strings.Join(plan, "\n")
	if !strings.Contains(joined, "SEARCH usage_hours USING") || !strings.Contains(joined, "(hour>? AND hour<?)") {
		t.Errorf("the summed read does not search the hour index:\n%s", joined)
	}
}
