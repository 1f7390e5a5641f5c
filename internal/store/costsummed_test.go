package store_test

import (
	"fmt"
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
	// The same prices without a change in the period: November is then
	// read as a whole month (usage_months), not cut into days.
	flat, err := usage.ParseRateCard([]byte(`{"currency": "USD", "rates": [
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32", "borrowed_hourly": "120.00"},
	  {"instance_type": "ml.trn1.32xlarge", "effective_from": "2026-01-01", "hourly": "21.50"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	periods := []usage.Period{nov, {From: nov.From.Add(5 * time.Hour), To: nov.From.Add(22*24*time.Hour + 7*time.Hour)},
		{From: nov.From.Add(-30 * time.Hour), To: nov.From.Add(9*24*time.Hour + 3*time.Hour)},
		{From: nov.From.Add(-43 * time.Hour), To: nov.To.Add(55 * time.Hour)}}
	for _, c := range []*usage.RateCard{card, flat} {
		for _, p := range periods {
			compareSummed(t, db, c, accel, p)
		}
	}
}

// compareSummed checks that the chargeback of the summed input of p equals
// that of its hourly rows, under every policy.
func compareSummed(t *testing.T, db *store.DB, card *usage.RateCard, accel map[string]usage.InstanceAccel, p usage.Period) {
	t.Helper()
	ctx := t.Context()
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

// The summed read takes each part of its span through an index: the hours
// of the partial days through usage_hours' hour index, the whole days
// through usage_days_span (migration 00037), which carries every column
// read: no table lookup per day row (one each through the primary key made
// the month's chargeback at 1,000 teams 221-507 ms), the whole months
// through usage_months' key (migration 00038). It never walks all of
// history.
func TestCostInputSummedUsesIndexes(t *testing.T) {
	db := openTB(t)
	from, to := nov.From.Add(-43*time.Hour), nov.To.Add(55*time.Hour)
	plan := explain(t, db, store.SummedHoursSQL, store.SpanParts(from, to)...)
	joined := strings.Join(plan, "\n")
	if strings.Count(joined, "SEARCH usage_hours USING INDEX usage_hours_by_hour (hour>? AND hour<?)") != 2 {
		t.Errorf("the summed read does not search the hour index for both partial days:\n%s", joined)
	}
	if strings.Count(joined, "SEARCH usage_days USING COVERING INDEX usage_days_span (day>? AND day<?)") != 2 {
		t.Errorf("the summed read does not search usage_days by day through its covering index for the days around the months:\n%s", joined)
	}
	if !strings.Contains(joined, "SEARCH usage_months USING PRIMARY KEY (month>? AND month<?)") {
		t.Errorf("the summed read does not search usage_months by month:\n%s", joined)
	}
	// The five parts are adjacent and each of one kind: hours, days, the
	// month of November, days, hours.
	want := []string{"2026-10-30T05:00:00.000000000Z", "2026-10-31T00:00:00.000000000Z", "2026-10-31T00:00:00.000000000Z", "2026-11-01T00:00:00.000000000Z",
		"2026-11-01T00:00:00.000000000Z", "2026-12-01T00:00:00.000000000Z", "2026-12-01T00:00:00.000000000Z", "2026-12-03T00:00:00.000000000Z",
		"2026-12-03T00:00:00.000000000Z", "2026-12-03T07:00:00.000000000Z"}
	if got := store.SpanParts(from, to); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("span parts of %s - %s:\n got %v\nwant %v", from, to, got, want)
	}
}

// usage_days is usage_hours summed per line and day after every kind of
// write the portal and an operator make: inserts, an upsert that replaces
// a row (its source too), the collector's delete of a range, pruning, a
// direct UPDATE and DELETE; and a day whose last hour goes is gone. Each
// trigger is needed: without the update trigger the replaced rows stay
// counted, without the delete trigger the pruned ones do.
func TestUsageDaysFollowHours(t *testing.T) {
	db := openTB(t)
	ctx := t.Context()
	check := func(step string) {
		t.Helper()
		const byDay = `SELECT team, namespace, instance_type, source, substr(hour, 1, 10) || 'T00:00:00.000000000Z' AS day, CAST(COUNT(*) AS BIGINT),
  CAST(SUM(guaranteed_accel_s) AS BIGINT), CAST(SUM(borrowed_accel_s) AS BIGINT), CAST(SUM(cpu_milli_s) AS BIGINT), CAST(SUM(memory_mib_s) AS BIGINT)
FROM usage_hours GROUP BY team, namespace, instance_type, source, substr(hour, 1, 10) ORDER BY 5, 1, 2, 3, 4`
		const days = `SELECT team, namespace, instance_type, source, day, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
FROM usage_days ORDER BY 5, 1, 2, 3, 4`
		want, got := queryRows(t, db.RawSQL(), byDay), queryRows(t, db.RawSQL(), days)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: usage_days differs from usage_hours summed by day:\n got %v\nwant %v", step, got, want)
		}
		const byMonth = `SELECT team, namespace, instance_type, source, substr(hour, 1, 7) || '-01T00:00:00.000000000Z' AS month, CAST(COUNT(*) AS BIGINT),
  CAST(SUM(guaranteed_accel_s) AS BIGINT), CAST(SUM(borrowed_accel_s) AS BIGINT), CAST(SUM(cpu_milli_s) AS BIGINT), CAST(SUM(memory_mib_s) AS BIGINT)
FROM usage_hours GROUP BY team, namespace, instance_type, source, substr(hour, 1, 7) ORDER BY 5, 1, 2, 3, 4`
		const months = `SELECT team, namespace, instance_type, source, month, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s
FROM usage_months ORDER BY 5, 1, 2, 3, 4`
		if want, got := queryRows(t, db.RawSQL(), byMonth), queryRows(t, db.RawSQL(), months); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: usage_months differs from usage_hours summed by month:\n got %v\nwant %v", step, got, want)
		}
	}
	day := nov.From.Add(3 * 24 * time.Hour)
	var hours []usage.Hour
	for i := range 72 {
		for j, team := range []string{"red", "blue"} {
			hours = append(hours, usage.Hour{Team: team, Namespace: "hyperpod-ns-" + team, InstanceType: "ml.p5.48xlarge", Start: day.Add(time.Duration(i) * time.Hour),
				GuaranteedAccelSeconds: int64(i*100 + j), BorrowedAccelSeconds: int64(i), CPUMilliSeconds: int64(i * 7), MemoryMiBSeconds: int64(j * 3)})
		}
	}
	if err := db.PutUsageHours(ctx, hours); err != nil {
		t.Fatal(err)
	}
	check("insert")
	replaced := []usage.Hour{hours[10], hours[11], hours[100]}
	for i := range replaced {
		replaced[i].GuaranteedAccelSeconds += 5000
		replaced[i].CPUMilliSeconds = 1
	}
	replaced[1].Source = usage.SourceDemo
	if err := db.PutUsageHours(ctx, replaced); err != nil {
		t.Fatal(err)
	}
	check("upsert")
	if err := db.ExecForTest(ctx, `UPDATE usage_hours SET borrowed_accel_s = borrowed_accel_s + 11 WHERE team = 'blue'`,
		`DELETE FROM usage_hours WHERE team = 'red' AND hour >= '`+day.Add(24*time.Hour).Format("2006-01-02")+`' AND hour < '`+day.Add(48*time.Hour).Format("2006-01-02")+`'`); err != nil {
		t.Fatal(err)
	}
	check("update and delete")
	if _, err := db.PruneUsage(ctx, day.Add(30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("prune")
	var first int
	if err := db.RawSQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_days WHERE day = '`+day.Format("2006-01-02")+`T00:00:00.000000000Z'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if first != 0 {
		t.Errorf("the pruned day still has %d rows in usage_days", first)
	}
}
