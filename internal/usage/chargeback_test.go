package usage

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var day0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func usd(minor int64) Money { return Money{Minor: minor, Currency: "USD"} }

func mustCard(t testing.TB, s string) *RateCard {
	t.Helper()
	c, err := ParseRateCard([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sumHolds checks the rule of the split: the teams' totals plus the
// unallocated amount equal the cluster's cost to the minor unit, and every
// team's total is its parts.
func sumHolds(t testing.TB, cb *Chargeback) {
	t.Helper()
	sum := cb.Unallocated.Minor
	for _, tc := range cb.Teams {
		var lines int64
		for _, l := range tc.Lines {
			lines += l.Cost().Minor
		}
		if lines != tc.Guaranteed.Minor+tc.Borrowed.Minor {
			t.Fatalf("%s: lines add to %d, direct charges to %d", tc.Team, lines, tc.Guaranteed.Minor+tc.Borrowed.Minor)
		}
		if tc.Total.Minor != tc.Guaranteed.Minor+tc.Borrowed.Minor+tc.Idle.Minor+tc.Overhead.Minor {
			t.Fatalf("%s: total %v is not its parts", tc.Team, tc.Total)
		}
		sum += tc.Total.Minor
	}
	if sum != cb.ClusterCost.Minor {
		t.Fatalf("teams + unallocated = %d, cluster cost = %d (policy %+v)", sum, cb.ClusterCost.Minor, cb.Policy)
	}
}

// A case small enough to do by hand: one single-accelerator type at 3.00
// an hour, borrowed at 4.50; three accelerator-hours of capacity; a used
// one hour within its guarantee, b one hour borrowed; one hour idle; 10 %
// overhead.
func TestChargeByHand(t *testing.T) {
	card := mustCard(t, `{"currency": "USD", "rates": [{"instance_type": "x", "effective_from": "2026-01-01", "hourly": "3", "borrowed_hourly": "4.50"}]}`)
	in := ChargeInput{
		Hours: []Hour{
			{Team: "a", Namespace: "team-a", InstanceType: "x", Start: day0, GuaranteedAccelSeconds: 3600},
			{Team: "b", Namespace: "team-b", InstanceType: "x", Start: day0, BorrowedAccelSeconds: 3600},
		},
		Cluster:      []ClusterHour{{Cluster: "c", InstanceType: "x", Start: day0, CapacityAccelSeconds: 3 * 3600, AllocatedAccelSeconds: 2 * 3600}},
		Rates:        card,
		Accelerators: map[string]InstanceAccel{"x": {Count: 1}},
		Guarantees:   Guarantees{"a": {"x": 2}, "b": {"x": 1}}.History(),
		Period:       MonthOf(day0),
	}
	// Cluster: 3 h × 3.00 = 9.00, + 10 % = 9.90. Direct: a 3.00, b 4.50. Idle 3.00.
	for _, c := range []struct {
		m            Method
		aIdle, bIdle int64
		aOver, bOver int64
		unallocated  int64
	}{
		// guarantee 2:1 -> idle 2.00/1.00, overhead 0.60/0.30; 9.90 - 11.40 = -1.50 (the borrowed premium)
		{SplitByGuarantee, 200, 100, 60, 30, -150},
		// usage 3.00:4.50 -> idle 1.20/1.80, overhead 0.36/0.54
		{SplitByUsage, 120, 180, 36, 54, -150},
		{SplitEvenly, 150, 150, 45, 45, -150},
		// nothing shared: 9.90 - 7.50 = 2.40
		{SplitUnallocated, 0, 0, 0, 0, 240},
	} {
		in.Policy = Policy{Method: c.m, OverheadBasisPoints: 1000}
		cb, err := Charge(in)
		if err != nil {
			t.Fatal(err)
		}
		sumHolds(t, cb)
		a, b := cb.Team("a"), cb.Team("b")
		if cb.ClusterCost != usd(990) || cb.IdleCost != usd(300) || cb.Overhead != usd(90) {
			t.Errorf("%s: cluster %v idle %v overhead %v", c.m, cb.ClusterCost, cb.IdleCost, cb.Overhead)
		}
		if a.Guaranteed != usd(300) || b.Borrowed != usd(450) || a.Borrowed != usd(0) || b.Guaranteed != usd(0) {
			t.Errorf("%s: direct a %v/%v b %v/%v", c.m, a.Guaranteed, a.Borrowed, b.Guaranteed, b.Borrowed)
		}
		if a.Idle != usd(c.aIdle) || b.Idle != usd(c.bIdle) || a.Overhead != usd(c.aOver) || b.Overhead != usd(c.bOver) || cb.Unallocated != usd(c.unallocated) {
			t.Errorf("%s: idle %v/%v overhead %v/%v unallocated %v; want %d/%d %d/%d %d",
				c.m, a.Idle, b.Idle, a.Overhead, b.Overhead, cb.Unallocated, c.aIdle, c.bIdle, c.aOver, c.bOver, c.unallocated)
		}
	}
}

// One cent split three ways goes to the first team by name; the rounded
// amounts still add up.
func TestChargeRoundingTieBreak(t *testing.T) {
	card := mustCard(t, `{"currency": "USD", "rates": [{"instance_type": "x", "effective_from": "2026-01-01", "hourly": "0.01"}]}`)
	in := ChargeInput{
		Cluster:      []ClusterHour{{Cluster: "c", InstanceType: "x", Start: day0, CapacityAccelSeconds: 3600}},
		Rates:        card,
		Accelerators: map[string]InstanceAccel{"x": {Count: 1}},
		Guarantees:   Guarantees{"c": {"x": 1}, "a": {"x": 1}, "b": {"x": 1}}.History(),
		Policy:       Policy{Method: SplitEvenly},
		Period:       MonthOf(day0),
	}
	for range 3 { // deterministic: the same answer every time
		cb, err := Charge(in)
		if err != nil {
			t.Fatal(err)
		}
		sumHolds(t, cb)
		if got := []int64{cb.Team("a").Idle.Minor, cb.Team("b").Idle.Minor, cb.Team("c").Idle.Minor}; fmt.Sprint(got) != "[1 0 0]" {
			t.Fatalf("idle shares %v, want [1 0 0]", got)
		}
	}
}

func TestChargeUnpricedAndNoRateCard(t *testing.T) {
	card := mustCard(t, `{"currency": "USD", "rates": [{"instance_type": "x", "effective_from": "2026-11-02", "hourly": "1"}]}`)
	in := ChargeInput{
		Hours: []Hour{
			{Team: "a", Namespace: "n", InstanceType: "x", Start: day0, GuaranteedAccelSeconds: 3600},                 // before the rate
			{Team: "a", Namespace: "n", InstanceType: "y", Start: day0.Add(48 * time.Hour), BorrowedAccelSeconds: 60}, // never priced
		},
		Rates:        card,
		Accelerators: map[string]InstanceAccel{"x": {Count: 1}, "y": {Count: 1}},
		Policy:       Policy{Method: SplitByUsage},
		Period:       MonthOf(day0),
	}
	cb, err := Charge(in)
	if err != nil {
		t.Fatal(err)
	}
	sumHolds(t, cb)
	if len(cb.Unpriced) != 2 || cb.Unpriced[0].AccelSeconds != 3600 || cb.Unpriced[1].AccelSeconds != 60 {
		t.Errorf("unpriced = %+v", cb.Unpriced)
	}
	if cb.Team("a").Total.Minor != 0 {
		t.Errorf("unpriced hours were charged: %v", cb.Team("a").Total)
	}
	in.Rates = nil
	if _, err := Charge(in); err == nil || !strings.Contains(err.Error(), "no rate card") {
		t.Errorf("no rate card: %v", err)
	}
}

// randomInput builds a period of random rows: teams, types with GPUs and
// Neuron cores, rates changing mid-period, borrowed premiums and discounts,
// cluster rows that do and do not agree with the team rows.
func randomInput(r *rand.Rand, teams, hours int) ChargeInput {
	types := []string{"ml.p5.48xlarge", "ml.trn1.32xlarge", "ml.g5.12xlarge"}
	accels := map[string]InstanceAccel{"ml.p5.48xlarge": {Count: 8}, "ml.trn1.32xlarge": {Count: 32, Neuron: true}, "ml.g5.12xlarge": {Count: 4}}
	var b strings.Builder
	b.WriteString(`{"currency": "USD", "rates": [`)
	for i, it := range types {
		for j := range 1 + r.IntN(3) {
			if i+j > 0 {
				b.WriteString(",")
			}
			from := day0.Add(time.Duration(j*r.IntN(hours+1)) * time.Hour)
			if j == 0 {
				from = day0.AddDate(0, -1, 0)
			}
			fmt.Fprintf(&b, `{"instance_type": %q, "effective_from": %q, "hourly": "%d.%02d"`, it, from.Format(time.RFC3339), r.IntN(120), r.IntN(100))
			if r.IntN(2) == 0 {
				fmt.Fprintf(&b, `, "borrowed_hourly": "%d.%02d"`, r.IntN(150), r.IntN(100))
			}
			b.WriteString("}")
		}
	}
	b.WriteString("]}")
	card, err := ParseRateCard([]byte(b.String()))
	if err != nil { // two rates drawn at one hour: keep the first
		card, _ = ParseRateCard([]byte(`{"currency": "USD", "rates": [{"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32"}]}`))
	}
	in := ChargeInput{Rates: card, Accelerators: accels, Guarantees: GuaranteeHistory{},
		Policy: Policy{Method: Methods[r.IntN(len(Methods))], OverheadBasisPoints: r.IntN(MaxOverheadBasisPoints + 1)},
		Period: Period{From: day0, To: day0.Add(time.Duration(hours) * time.Hour)}}
	for ti := range teams {
		team := fmt.Sprintf("team-%03d", ti)
		if r.IntN(4) > 0 {
			in.Guarantees.Add(team, types[r.IntN(len(types))], time.Time{}, int64(r.IntN(4)))
		}
	}
	for h := range hours {
		at := day0.Add(time.Duration(h) * time.Hour)
		for _, it := range types {
			n := int64(accels[it].Count)
			in.Cluster = append(in.Cluster, ClusterHour{Cluster: "c", InstanceType: it, Start: at,
				CapacityAccelSeconds: n * 3600 * int64(r.IntN(10)), AllocatedAccelSeconds: r.Int64N(n * 3600 * 10)})
		}
		for ti := range teams {
			if r.IntN(3) == 0 {
				continue
			}
			it := types[r.IntN(len(types))]
			in.Hours = append(in.Hours, Hour{Team: fmt.Sprintf("team-%03d", ti), Namespace: fmt.Sprintf("hyperpod-ns-team-%03d", ti),
				InstanceType: it, Start: at, GuaranteedAccelSeconds: r.Int64N(8 * 3600), BorrowedAccelSeconds: r.Int64N(3) * r.Int64N(8*3600),
				CPUMilliSeconds: r.Int64N(192000 * 3600)})
		}
	}
	return in
}

// The property: for any rows, rates and policy, the teams' charges plus the
// unallocated amount equal the cluster's cost to the cent.
func TestChargeAddsUpToTheCent(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 12))
		in := randomInput(r, 1+r.IntN(12), 1+r.IntN(72))
		cb, err := Charge(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		sumHolds(t, cb)
		// Deterministic: the same input gives the same split.
		again, _ := Charge(in)
		if render(again) != render(cb) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}

func render(cb *Chargeback) string {
	var b strings.Builder
	fmt.Fprintf(&b, "period %s policy %s overhead %s%%\n", cb.Period.Label(), cb.Policy.Method, FormatOverhead(cb.Policy.OverheadBasisPoints))
	fmt.Fprintf(&b, "cluster cost %v = infrastructure %v + overhead %v; idle %v\n", cb.ClusterCost, cb.Infrastructure, cb.Overhead, cb.IdleCost)
	for _, tc := range cb.Teams {
		fmt.Fprintf(&b, "%s: guaranteed %v borrowed %v idle %v overhead %v total %v\n", tc.Team, tc.Guaranteed, tc.Borrowed, tc.Idle, tc.Overhead, tc.Total)
		for _, l := range tc.Lines {
			fmt.Fprintf(&b, "  %s %s neuron=%v guaranteed %sh borrowed %sh cpu %sh: %v + %v\n", l.Namespace, l.InstanceType, l.Neuron,
				Hours(l.GuaranteedAccelSeconds), Hours(l.BorrowedAccelSeconds), Hours(l.CPUMilliSeconds/1000), l.Guaranteed, l.Borrowed)
		}
	}
	fmt.Fprintf(&b, "unallocated %v\n", cb.Unallocated)
	for _, u := range cb.Unpriced {
		fmt.Fprintf(&b, "unpriced %s %sh: %s\n", u.InstanceType, Hours(u.AccelSeconds), u.Reason)
	}
	for _, n := range cb.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// goldenInput: three teams over three days, GPUs and Neuron cores, a price
// cut at noon on day two, a borrowed premium on one type, 12.5 % overhead.
func goldenInput(t testing.TB) ChargeInput {
	card := mustCard(t, `{"currency": "USD", "rates": [
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32", "borrowed_hourly": "110.00"},
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-11-02T12:00:00Z", "hourly": "90.00", "borrowed_hourly": "100.00"},
	  {"instance_type": "ml.trn1.32xlarge", "effective_from": "2026-01-01", "hourly": "21.50"}
	]}`)
	in := ChargeInput{Rates: card,
		Accelerators: map[string]InstanceAccel{"ml.p5.48xlarge": {Count: 8}, "ml.trn1.32xlarge": {Count: 32, Neuron: true}},
		Guarantees:   Guarantees{"red": {"ml.p5.48xlarge": 2}, "blue": {"ml.p5.48xlarge": 1, "ml.trn1.32xlarge": 1}, "green": {"ml.trn1.32xlarge": 1}}.History(),
		Period:       Period{From: day0, To: day0.Add(72 * time.Hour)}}
	for h := range 72 {
		at := day0.Add(time.Duration(h) * time.Hour)
		busy := int64(h%24) >= 8 && int64(h%24) < 20
		in.Cluster = append(in.Cluster,
			ClusterHour{Cluster: "demo", InstanceType: "ml.p5.48xlarge", Start: at, CapacityAccelSeconds: 4 * 8 * 3600},
			ClusterHour{Cluster: "demo", InstanceType: "ml.trn1.32xlarge", Start: at, CapacityAccelSeconds: 2 * 32 * 3600})
		red := Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: 8 * 3600, CPUMilliSeconds: 96000 * 3600}
		if busy {
			red.GuaranteedAccelSeconds, red.BorrowedAccelSeconds = 16*3600, 4*3600+1234
		}
		blue := Hour{Team: "blue", Namespace: "hyperpod-ns-blue", InstanceType: "ml.trn1.32xlarge", Start: at, GuaranteedAccelSeconds: 20 * 3600, CPUMilliSeconds: 64000 * 3600}
		in.Hours = append(in.Hours, red, blue)
		if h < 30 { // green starts late on day two, and borrows
			in.Hours = append(in.Hours, Hour{Team: "green", Namespace: "hyperpod-ns-green", InstanceType: "ml.trn1.32xlarge", Start: at, GuaranteedAccelSeconds: 32*3600 - 17, BorrowedAccelSeconds: 7 * 3600})
		}
	}
	for i := range in.Cluster {
		c := &in.Cluster[i]
		for _, h := range in.Hours {
			if h.Start.Equal(c.Start) && h.InstanceType == c.InstanceType {
				c.AllocatedAccelSeconds += h.AccelSeconds()
			}
		}
	}
	return in
}

func TestChargeGolden(t *testing.T) {
	for _, m := range Methods {
		t.Run(string(m), func(t *testing.T) {
			in := goldenInput(t)
			in.Policy = Policy{Method: m, OverheadBasisPoints: 1250}
			cb, err := Charge(in)
			if err != nil {
				t.Fatal(err)
			}
			sumHolds(t, cb)
			golden(t, filepath.Join("testdata", "chargeback_"+string(m)+".golden"), render(cb))
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if the change is intended)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestProject(t *testing.T) {
	if got := Project(usd(1000), 10*24*time.Hour, 30*24*time.Hour); got != usd(3000) {
		t.Errorf("Project = %v", got)
	}
	if got := Project(usd(100), 3*time.Hour, 720*time.Hour); got != usd(24000) {
		t.Errorf("Project = %v", got)
	}
	if got := Project(usd(100), 0, 720*time.Hour); got != usd(100) {
		t.Errorf("Project with nothing elapsed = %v", got)
	}
}

// 200 teams × 30 days of hourly rows (144,000 rows): the target is
// under 200 ms per chargeback.
func BenchmarkCharge200Teams30Days(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	in := randomInput(r, 200, 30*24)
	in.Hours = in.Hours[:0] // every team every hour
	for h := range 30 * 24 {
		for ti := range 200 {
			in.Hours = append(in.Hours, Hour{Team: fmt.Sprintf("team-%03d", ti), Namespace: fmt.Sprintf("hyperpod-ns-team-%03d", ti),
				InstanceType: "ml.p5.48xlarge", Start: day0.Add(time.Duration(h) * time.Hour),
				GuaranteedAccelSeconds: r.Int64N(8 * 3600), BorrowedAccelSeconds: r.Int64N(8 * 3600)})
		}
	}
	b.ReportMetric(float64(len(in.Hours)), "rows")
	b.ResetTimer()
	for range b.N {
		if _, err := Charge(in); err != nil {
			b.Fatal(err)
		}
	}
}

// Issue 38: the split by guarantee weighs each guarantee for the time it
// was in force. Red's guarantee goes from 1 to 3 instances on November
// 16th: October's chargeback does not move, and in November red's weight is
// 1 x 15 days + 3 x 15 days against blue's 1 x 30 days, so red takes 2/3 of
// the idle capacity (to the minor unit that the rounding may move).
func TestChargeByGuaranteeInForce(t *testing.T) {
	card := mustCard(t, `{"currency": "USD", "rates": [{"instance_type": "x", "effective_from": "2026-01-01", "hourly": "3"}]}`)
	oct := MonthOf(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC))
	nov := MonthOf(day0)
	in := func(p Period, g GuaranteeHistory) ChargeInput {
		var cluster []ClusterHour
		for h := p.From; h.Before(p.To); h = h.Add(time.Hour) {
			cluster = append(cluster, ClusterHour{Cluster: "c", InstanceType: "x", Start: h, CapacityAccelSeconds: 4 * 3600})
		}
		return ChargeInput{Cluster: cluster, Rates: card, Accelerators: map[string]InstanceAccel{"x": {Count: 1}}, Guarantees: g,
			Policy: Policy{Method: SplitByGuarantee}, Period: p}
	}
	before := Guarantees{"red": {"x": 1}, "blue": {"x": 1}}.History()
	after := Guarantees{"red": {"x": 1}, "blue": {"x": 1}}.History()
	after.Add("red", "x", time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC), 3)

	octBefore, err := Charge(in(oct, before))
	if err != nil {
		t.Fatal(err)
	}
	octAfter, err := Charge(in(oct, after))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", octBefore) != fmt.Sprintf("%+v", octAfter) {
		t.Errorf("October moved when November's guarantee changed:\n%+v\nwas\n%+v", octAfter, octBefore)
	}
	if r, b := octAfter.Team("red").Idle.Minor, octAfter.Team("blue").Idle.Minor; r != b || r+b != octAfter.IdleCost.Minor {
		t.Errorf("October: red %d, blue %d of idle %d; want halves", r, b, octAfter.IdleCost.Minor)
	}

	cb, err := Charge(in(nov, after))
	if err != nil {
		t.Fatal(err)
	}
	sumHolds(t, cb)
	idle := cb.IdleCost.Minor // 4 accelerators x 720 h x 3.00 = 8640.00
	if idle != 4*720*300 {
		t.Fatalf("idle cost %d", idle)
	}
	if r := cb.Team("red").Idle.Minor; r < idle*2/3-1 || r > idle*2/3+1 {
		t.Errorf("November: red's idle share %d, want 2/3 of %d", r, idle)
	}
}

// Issue 38 item 3: usage in hours whose capacity the collector never
// recorded (before it first saw the nodes: capacity 0) is charged to the
// team, and the cluster's cost counts the capacity held then, so the teams
// are never charged more than the cluster cost and unallocated does not go
// negative; the chargeback says so. Type x at 3.00 an hour per accelerator:
// 10:00, capacity unknown, red held 2 (6.00); 11:00, capacity 4 recorded,
// red held 2 (6.00, 6.00 idle).
func TestChargeCapacityUnknown(t *testing.T) {
	card := mustCard(t, `{"currency": "USD", "rates": [{"instance_type": "x", "effective_from": "2026-01-01", "hourly": "3"}]}`)
	h10, h11 := day0.Add(10*time.Hour), day0.Add(11*time.Hour)
	cb, err := Charge(ChargeInput{
		Hours: []Hour{
			{Team: "red", Namespace: "ns", InstanceType: "x", Start: h10, GuaranteedAccelSeconds: 2 * 3600},
			{Team: "red", Namespace: "ns", InstanceType: "x", Start: h11, GuaranteedAccelSeconds: 2 * 3600},
		},
		Cluster: []ClusterHour{
			{Cluster: "c", InstanceType: "x", Start: h10, AllocatedAccelSeconds: 2 * 3600},
			{Cluster: "c", InstanceType: "x", Start: h11, CapacityAccelSeconds: 4 * 3600, AllocatedAccelSeconds: 2 * 3600},
		},
		Rates: card, Accelerators: map[string]InstanceAccel{"x": {Count: 1}}, Guarantees: Guarantees{"red": {"x": 2}}.History(),
		Policy: Policy{Method: SplitUnallocated}, Period: MonthOf(day0),
	})
	if err != nil {
		t.Fatal(err)
	}
	sumHolds(t, cb)
	if cb.ClusterCost != usd(1800) || cb.Team("red").Total != usd(1200) || cb.Unallocated != usd(600) || cb.IdleCost != usd(600) {
		t.Errorf("cluster %v, red %v, unallocated %v, idle %v; want 18.00, 12.00, 6.00, 6.00", cb.ClusterCost, cb.Team("red").Total, cb.Unallocated, cb.IdleCost)
	}
	if len(cb.Notes) != 1 || !strings.Contains(cb.Notes[0], "Capacity unknown: in 1 hour(s) of x the teams held 2.000 accelerator-hours more than the capacity recorded") {
		t.Errorf("notes = %q", cb.Notes)
	}
}
