package usage

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func TestPercentileNearestRank(t *testing.T) {
	one20 := make([]int64, 20)
	for i := range one20 {
		one20[i] = int64(20 - i) // 20..1, unsorted on purpose
	}
	for _, tc := range []struct {
		values   []int64
		p        int
		want     int64
		wantRank int
	}{
		{[]int64{5, 1, 4, 2, 3}, 50, 3, 3},    // ceil(2.5) = 3rd smallest
		{one20, 95, 19, 19},                   // ceil(19) = 19th
		{one20, 96, 20, 20},                   // ceil(19.2) = 20th
		{one20, 100, 20, 20},                  // the largest
		{one20, 1, 1, 1},                      // ceil(0.2) = 1st
		{[]int64{7}, 95, 7, 1},                // one sample is every percentile
		{[]int64{0, 0, 0, 9}, 75, 0, 3},       // ceil(3) = 3rd: still 0
		{[]int64{0, 0, 0, 9}, 76, 9, 4},       // ceil(3.04) = 4th
		{[]int64{3, 3, 1, 1, 2, 2}, 50, 2, 3}, // ties
	} {
		got, rank, ok := Percentile(tc.values, tc.p)
		if !ok || got != tc.want || rank != tc.wantRank {
			t.Errorf("Percentile(%v, %d) = %d (rank %d, %v), want %d (rank %d)", tc.values, tc.p, got, rank, ok, tc.want, tc.wantRank)
		}
	}
	if _, _, ok := Percentile(nil, 95); ok {
		t.Error("no values has no percentile")
	}
	if _, _, ok := Percentile([]int64{1}, 0); ok {
		t.Error("p=0 is not a percentile")
	}
}

// hoursOf builds rows of one instance type: gpus[i] accelerators held all
// of hour i (split as guaranteed up to 8, the rest borrowed).
func hoursOf(typ string, gpus []int64) []Hour {
	var out []Hour
	for i, g := range gpus {
		if g < 0 {
			continue // no row at all
		}
		s := g * 3600
		out = append(out, Hour{Team: "red", Namespace: "hyperpod-ns-red", InstanceType: typ, Start: t0.Add(time.Duration(i) * time.Hour),
			GuaranteedAccelSeconds: min(s, 8*3600), BorrowedAccelSeconds: max(0, s-8*3600)})
	}
	return out
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestSuggestGuaranteeHandComputed(t *testing.T) {
	const p5 = "ml.p5.48xlarge"
	end := t0.Add(200 * time.Hour)
	// 200 hours: 190 at 8 GPUs and 10 at 20. p95 = the ceil(0.95×200) =
	// 190th smallest = 8 GPUs = 1 instance of 8.
	rows := hoursOf(p5, append(repeat(8, 190), repeat(20, 10)...))
	s := SuggestGuarantee(rows, nil, p5, 8, 2, t0, end)
	if !s.Enough || s.Samples != 200 || s.P95Rank != 190 || s.P95AccelSeconds != 8*3600 || s.SuggestedInstances != 1 {
		t.Errorf("190×8 + 10×20: %+v, want 200 samples, rank 190, p95 8 GPUs, 1 instance", s)
	}
	// 189 at 8 and 11 at 20: the 190th smallest is 20 GPUs; 20/8 = 2.5
	// instances, rounded up to 3. Borrowed hours count.
	rows = hoursOf(p5, append(repeat(8, 189), repeat(20, 11)...))
	s = SuggestGuarantee(rows, nil, p5, 8, 2, t0, end)
	if s.P95AccelSeconds != 20*3600 || s.SuggestedInstances != 3 {
		t.Errorf("189×8 + 11×20: %+v, want p95 20 GPUs, 3 instances", s)
	}
	text := strings.Join(s.Reasoning(), " ")
	for _, want := range []string{"200 hourly samples", "the 190th smallest of 200", "20.00 accelerators", "2.50 instances, rounded up to 3", "current guarantee is 2: raising it to 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("reasoning lacks %q:\n%s", want, text)
		}
	}
	// Another type's rows do not count.
	s = SuggestGuarantee(append(rows, hoursOf("ml.g5.8xlarge", repeat(99, 200))...), nil, p5, 8, 2, t0, end)
	if s.P95AccelSeconds != 20*3600 {
		t.Errorf("other instance type counted: p95 %d", s.P95AccelSeconds)
	}
}

func TestSuggestGuaranteeCountsIdleHoursAndSkipsMissing(t *testing.T) {
	const p5 = "ml.p5.48xlarge"
	end := t0.Add(168 * time.Hour)
	// A week; 9 hours at 16 GPUs, no row at all for the other 159: those
	// held 0. ceil(0.95×168) = 160th smallest = 16 GPUs (159 zeros first):
	// 2 instances.
	gpus := append(repeat(-1, 159), repeat(16, 9)...)
	s := SuggestGuarantee(hoursOf(p5, gpus), nil, p5, 8, 1, t0, end)
	if !s.Enough || s.Samples != 168 || s.P95Rank != 160 || s.SuggestedInstances != 2 {
		t.Errorf("9 busy hours of 168: %+v, want rank 160 → 2 instances", s)
	}
	// 8 busy hours: the 160th smallest is a zero: suggest 0.
	gpus = append(repeat(-1, 160), repeat(16, 8)...)
	s = SuggestGuarantee(hoursOf(p5, gpus), nil, p5, 8, 1, t0, end)
	if s.SuggestedInstances != 0 || !strings.Contains(strings.Join(s.Reasoning(), " "), "lowering it to 0") {
		t.Errorf("8 busy hours of 168: %+v, want 0", s)
	}
	// A 10-hour missing period is left out, not counted as zero: 158
	// samples, too few for a suggestion.
	miss := []Missing{{Cluster: "c", From: t0.Add(5 * time.Hour), To: t0.Add(15 * time.Hour)}}
	s = SuggestGuarantee(hoursOf(p5, gpus), miss, p5, 8, 1, t0, end)
	if s.Samples != 158 || s.Excluded != 10 || s.Enough {
		t.Errorf("with 10 missing hours: %+v, want 158 samples, 10 excluded, not enough", s)
	}
	if txt := strings.Join(s.Reasoning(), " "); !strings.Contains(txt, "leaving out 10 hours of missing data") || !strings.Contains(txt, "at least 168") {
		t.Errorf("reasoning: %s", txt)
	}
	// An instance type without accelerators: no suggestion.
	if s := SuggestGuarantee(nil, nil, "ml.c5.large", 0, 0, t0, end); s.Enough {
		t.Errorf("0 accelerators per instance suggested %+v", s)
	}
}

func TestSumByHour(t *testing.T) {
	rows := []Hour{
		{Team: "red", Namespace: "a", InstanceType: "x", Start: t0.Add(time.Hour), GuaranteedAccelSeconds: 10, Running: 1, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1},
		{Team: "red", Namespace: "a", InstanceType: "y", Start: t0, GuaranteedAccelSeconds: 5, BorrowedAccelSeconds: 7, Running: 2, Pending: 3, Preempted: 1, WaitP50Seconds: 30, WaitP90Seconds: 60, WaitP99Seconds: 90},
		{Team: "red", Namespace: "b", InstanceType: "x", Start: t0, GuaranteedAccelSeconds: 1, Running: 1, WaitP50Seconds: 40, WaitP90Seconds: 50, WaitP99Seconds: 95, Source: SourceDemo},
	}
	got := SumByHour(rows)
	if len(got) != 2 || !got[0].Start.Equal(t0) {
		t.Fatalf("SumByHour = %+v", got)
	}
	h := got[0]
	if h.GuaranteedAccelSeconds != 6 || h.BorrowedAccelSeconds != 7 || h.Running != 3 || h.Pending != 3 || h.Preempted != 1 ||
		h.WaitP50Seconds != 40 || h.WaitP90Seconds != 60 || h.WaitP99Seconds != 95 || !h.Demo {
		t.Errorf("hour 0 = %+v", h)
	}
	if got[1].WaitP50Seconds != -1 || got[1].Demo {
		t.Errorf("hour 1 = %+v", got[1])
	}
	if d := Days(t0.Add(23*time.Hour), t0.Add(49*time.Hour)); len(d) != 3 || !d[0].Equal(t0) {
		t.Errorf("Days = %v", d)
	}
}

func TestDemoUsageIsDeterministicAndPlausible(t *testing.T) {
	teams := []DemoTeam{
		{Team: "red", Namespace: "hyperpod-ns-red", Types: []DemoType{{"ml.p5.48xlarge", 16, 26}}},
		{Team: "blue", Namespace: "hyperpod-ns-blue", Types: []DemoType{{"ml.p5.48xlarge", 16, 20}, {"ml.g5.8xlarge", 0, 3}}},
	}
	capacity := map[string]int{"ml.p5.48xlarge": 64, "ml.g5.8xlarge": 16}
	from := t0.Add(30 * time.Minute)
	to := from.Add(60 * 24 * time.Hour)
	a := DemoUsage(teams, "shared-hp", capacity, from, to, 1)
	b := DemoUsage(teams, "shared-hp", capacity, from, to, 1)
	if len(a.Hours) != len(b.Hours) || a.Hours[100] != b.Hours[100] || a.Cluster[7] != b.Cluster[7] {
		t.Fatal("the same arguments gave different demo data")
	}
	hours := 60*24 - 6 // the missing period has no rows
	if len(a.Hours) != 3*hours || len(a.Cluster) != 2*hours {
		t.Errorf("%d rows, %d cluster rows; want %d and %d", len(a.Hours), len(a.Cluster), 3*hours, 2*hours)
	}
	if a.Missing.To.Sub(a.Missing.From) != 6*time.Hour {
		t.Errorf("missing period %+v", a.Missing)
	}
	var borrowed, preempted int64
	var unhealthy bool
	perHour := map[time.Time]int64{}
	for _, h := range a.Hours {
		if h.Source != SourceDemo || !h.Start.Equal(HourStart(h.Start)) || h.Start.Before(t0) || !h.Start.Before(to) {
			t.Fatalf("bad row %+v", h)
		}
		if a.Missing.Overlaps(h.Start, h.Start.Add(time.Hour)) {
			t.Fatalf("row inside the missing period: %+v", h)
		}
		if h.GuaranteedAccelSeconds > 16*3600 {
			t.Fatalf("guaranteed above the guarantee: %+v", h)
		}
		borrowed += h.BorrowedAccelSeconds
		preempted += int64(h.Preempted)
		if h.InstanceType == "ml.p5.48xlarge" {
			perHour[h.Start] += h.AccelSeconds()
		}
	}
	for at, s := range perHour {
		if s > 64*3600 {
			t.Fatalf("%s: %d accelerator-seconds held, above capacity", at, s)
		}
	}
	for _, c := range a.Cluster {
		unhealthy = unhealthy || c.UnhealthyNodeSeconds > 0
		if c.InstanceType == "ml.p5.48xlarge" && c.AllocatedAccelSeconds != perHour[c.Start] {
			t.Fatalf("cluster hour %s allocated %d, teams held %d", c.Start, c.AllocatedAccelSeconds, perHour[c.Start])
		}
	}
	if borrowed == 0 || preempted == 0 || !unhealthy {
		t.Errorf("borrowed %d, preempted %d, unhealthy %v: the demo should show all three", borrowed, preempted, unhealthy)
	}
}

// GuaranteeStanding by hand, guarantee 8 accelerators (28,800 s per hour):
// a missing hour is left out, an hour without a row is 0, and the bounds are
// strict (a mean of exactly 8 is not above; a p95 of exactly 8 is not below).
func TestGuaranteeStanding(t *testing.T) {
	h0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return h0.Add(time.Duration(i) * time.Hour) }
	gap := []Missing{{From: at(3), To: at(4), Reason: "down"}}
	for _, tc := range []struct {
		name      string
		held      map[time.Time]int64
		mean, p95 int64
		want      Standing
	}{
		// hours 0,1,2 = 8, 8, 8 GPUs; hour 3 missing (its 99 never counts).
		{"exactly the guarantee", map[time.Time]int64{at(0): 28800, at(1): 28800, at(2): 28800, at(3): 99 * 3600}, 28800, 28800, Within},
		// 12, 12, 4 → mean 9.33 > 8.
		{"above", map[time.Time]int64{at(0): 43200, at(1): 43200, at(2): 14400}, 33600, 43200, Above},
		// 7, 0 (no row), 7 → p95 = 7 < 8.
		{"below", map[time.Time]int64{at(0): 25200, at(2): 25200}, 16800, 25200, Below},
	} {
		mean, p95, st, ok := GuaranteeStanding(tc.held, gap, at(0), at(4), 8)
		if !ok || mean != tc.mean || p95 != tc.p95 || st != tc.want {
			t.Errorf("%s: = %d, %d, %q, %v; want %d, %d, %q", tc.name, mean, p95, st, ok, tc.mean, tc.p95, tc.want)
		}
	}
	if _, _, _, ok := GuaranteeStanding(nil, []Missing{{From: at(0), To: at(4)}}, at(0), at(4), 8); ok {
		t.Error("a period wholly missing gave a standing")
	}
}
