package usage_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/usage"
)

var h0 = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

func at(hm string) time.Time {
	d, err := time.ParseDuration(hm)
	if err != nil {
		panic(err)
	}
	return h0.Add(d - 10*time.Hour)
}

const (
	red, redNS   = "red", "hyperpod-ns-red"
	blue, blueNS = "blue", "hyperpod-ns-blue"
	p5           = "ml.p5.48xlarge"
)

func hour(team, ns, itype string, start time.Time, g, b, cpu, mem int64, run, pend, pre int, waits ...int64) usage.Hour {
	h := usage.Hour{Team: team, Namespace: ns, InstanceType: itype, Start: start,
		GuaranteedAccelSeconds: g, BorrowedAccelSeconds: b, CPUMilliSeconds: cpu, MemoryMiBSeconds: mem,
		Running: run, Pending: pend, Preempted: pre, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1,
		Source: usage.SourceCluster}
	if len(waits) == 3 {
		h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds = waits[0], waits[1], waits[2]
	}
	return h
}

func TestIntegrateExact(t *testing.T) {
	cases := []struct {
		name   string
		allocs []usage.Alloc
		wls    []usage.Workload
		until  time.Time
		g      usage.Guarantees // nil: red's 8
		want   []usage.Hour
	}{{
		// A: 8 GPUs, 4 CPUs, 1024 MiB, 10:30 -> 12:15 (crosses two hour
		// boundaries). B: 4 GPUs, 1 CPU, 512 MiB, 10:45 -> 11:30: A fills the
		// guarantee first, so B borrows all of its 4. C: 2 GPUs, 500m, 256
		// MiB, 11:50:00 -> 11:50:40, a 40-second task: borrowed too.
		name: "boundaries, borrowing, a 40-second task",
		allocs: []usage.Alloc{
			{Key: "a", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 8, CPUMilli: 4000, MemoryMiB: 1024, Start: at("10h30m"), End: at("12h15m")},
			{Key: "b", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 4, CPUMilli: 1000, MemoryMiB: 512, Start: at("10h45m"), End: at("11h30m")},
			{Key: "c", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 2, CPUMilli: 500, MemoryMiB: 256, Start: at("11h50m"), End: at("11h50m40s")},
		},
		until: at("12h30m"),
		want: []usage.Hour{
			// 10h: A 8x1800 = 14400 guaranteed; B 4x900 = 3600 borrowed.
			// CPU 4000x1800 + 1000x900 = 8,100,000; memory 1024x1800 +
			// 512x900 = 2,304,000. Two tasks ran.
			hour(red, redNS, p5, at("10h"), 14400, 3600, 8_100_000, 2_304_000, 2, 0, 0),
			// 11h: A 8x3600 = 28800 guaranteed; B 4x1800 = 7200 and C 2x40 =
			// 80 borrowed = 7280. CPU 4000x3600 + 1000x1800 + 500x40 =
			// 16,220,000; memory 1024x3600 + 512x1800 + 256x40 = 4,618,240.
			hour(red, redNS, p5, at("11h"), 28800, 7280, 16_220_000, 4_618_240, 3, 0, 0),
			// 12h: A 8x900 = 7200; CPU 4000x900; memory 1024x900.
			hour(red, redNS, p5, at("12h"), 7200, 0, 3_600_000, 921_600, 1, 0, 0),
		},
	}, {
		// Workload W (4 GPUs, red guaranteed only 2 here) is created 10:00,
		// admitted 10:10 (waited 600 s), its pod P1 runs 10:10 -> 10:40, it
		// is preempted at 10:40, waits again and is readmitted at 11:05
		// (waited 1500 s since its eviction); P2 runs from 11:05, still
		// running at 11:30.
		name: "preempted and readmitted",
		allocs: []usage.Alloc{
			{Key: "p1", Task: "w", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 4, Start: at("10h10m"), End: at("10h40m")},
			{Key: "p2", Task: "w", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 4, Start: at("11h05m")},
		},
		wls: []usage.Workload{{Key: "w", Team: red, Namespace: redNS, InstanceType: p5,
			Pending:     []usage.Span{{From: at("10h"), To: at("10h10m")}, {From: at("10h40m"), To: at("11h05m")}},
			Admissions:  []usage.Admission{{At: at("10h10m"), WaitSeconds: 600}, {At: at("11h05m"), WaitSeconds: 1500}},
			Preemptions: []time.Time{at("10h40m")},
		}},
		until: at("11h30m"),
		g:     usage.Guarantees{red: {p5: 2}},
		want: []usage.Hour{
			// 10h: P1 1800 s x 4: 2 guaranteed (3600), 2 borrowed (3600);
			// pending twice but one workload; preempted once; waits [600].
			hour(red, redNS, p5, at("10h"), 3600, 3600, 0, 0, 1, 1, 1, 600, 600, 600),
			// 11h: P2 11:05 -> 11:30 = 1500 s x (2 + 2); pending 11:00 ->
			// 11:05; waits [1500].
			hour(red, redNS, p5, at("11h"), 3000, 3000, 0, 0, 1, 1, 0, 1500, 1500, 1500),
		},
	}, {
		// Blue has no guarantee: everything it holds is borrowed, and red's
		// guarantee is not shared with blue. Ten workloads admitted in the
		// hour after waiting 10, 20, ... 100 s: nearest-rank p50 = 5th = 50,
		// p90 = 9th = 90, p99 = 10th = 100. A workload still pending at
		// until counts as pending.
		name: "no guarantee, percentiles, a pending workload",
		allocs: []usage.Alloc{
			{Key: "x", Team: blue, Namespace: blueNS, InstanceType: p5, Accelerators: 8, Start: at("10h"), End: at("10h01m")},
			{Key: "y", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 8, Start: at("10h"), End: at("10h01m")},
		},
		wls: append(tenAdmitted(), usage.Workload{Key: "q", Team: blue, Namespace: blueNS, InstanceType: p5,
			Pending: []usage.Span{{From: at("10h50m")}}}),
		until: at("11h"),
		want: []usage.Hour{
			hour(blue, blueNS, p5, at("10h"), 0, 480, 0, 0, 1, 1, 0, 50, 90, 100),
			hour(red, redNS, p5, at("10h"), 480, 0, 0, 0, 1, 0, 0),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Red is guaranteed 8 GPUs (one p5) on p5 unless the case says.
			g := usage.Guarantees{red: {p5: 8}}
			if tc.g != nil {
				g = tc.g
			}
			got := usage.Integrate(at("10h"), tc.until, tc.allocs, tc.wls, g.History())
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func tenAdmitted() []usage.Workload {
	var out []usage.Workload
	for i := int64(1); i <= 10; i++ {
		out = append(out, usage.Workload{Key: string(rune('a' + i)), Team: blue, Namespace: blueNS, InstanceType: p5,
			Admissions: []usage.Admission{{At: at("10h30m"), WaitSeconds: 10 * i}}})
	}
	return out
}

// Integrating a later window gives the same hours as the whole: the
// collector recomputes only the hours it touched.
func TestIntegrateWindowed(t *testing.T) {
	g := usage.Guarantees{red: {p5: 8}}
	allocs := []usage.Alloc{
		{Key: "a", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 8, Start: at("10h30m"), End: at("12h15m")},
		{Key: "b", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 4, Start: at("9h45m"), End: at("11h30m")},
	}
	all := usage.Integrate(at("9h"), at("13h"), allocs, nil, g.History())
	later := usage.Integrate(at("11h"), at("13h"), allocs, nil, g.History())
	if len(all) != 4 || !reflect.DeepEqual(all[2:], later) {
		t.Errorf("whole %+v\nwindow %+v", all, later)
	}
	// In 10h, B (started 9:45) comes first: 4 guaranteed x 3600; A takes
	// the remaining 4 guaranteed x 1800 and borrows 4 x 1800.
	if h := all[1]; h.GuaranteedAccelSeconds != 4*3600+4*1800 || h.BorrowedAccelSeconds != 4*1800 {
		t.Errorf("10h = %+v", h)
	}
}

func TestIntegrateCluster(t *testing.T) {
	nodes := []usage.NodeSpan{
		{Node: "n1", InstanceType: p5, Accelerators: 8, Schedulable: true, From: at("10h")},
		{Node: "n2", InstanceType: p5, Accelerators: 8, Schedulable: true, From: at("10h"), To: at("11h")},
		{Node: "n2", InstanceType: p5, Accelerators: 8, Schedulable: false, From: at("11h"), To: at("11h30m")},
	}
	allocs := []usage.Alloc{{Key: "a", Team: red, InstanceType: p5, Accelerators: 8, Start: at("10h30m"), End: at("12h15m")}}
	got := usage.IntegrateCluster("hp", at("10h"), at("12h"), nodes, allocs)
	want := []usage.ClusterHour{
		// 10h: two schedulable nodes: 16x3600 = 57600; A 8x1800 = 14400.
		{Cluster: "hp", InstanceType: p5, Start: at("10h"), CapacityAccelSeconds: 57600, AllocatedAccelSeconds: 14400, Source: usage.SourceCluster},
		// 11h: n1 only, 8x3600 = 28800; n2 unhealthy 1800 node-seconds; A
		// 8x3600 (the open n1 span and A stop at until = 12:00).
		{Cluster: "hp", InstanceType: p5, Start: at("11h"), CapacityAccelSeconds: 28800, AllocatedAccelSeconds: 28800, UnhealthyNodeSeconds: 1800, Source: usage.SourceCluster},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	if got[0].IdleAccelSeconds() != 43200 {
		t.Errorf("idle = %d", got[0].IdleAccelSeconds())
	}
}

// A Workload never admitted and naming no instance type, and a pod on a
// node not seen, are counted under usage.NoInstanceType, never under a blank.
func TestIntegrateNoInstanceType(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	wls := []usage.Workload{{Key: "w", Team: "a", Namespace: "ns-a", Created: t0, Pending: []usage.Span{{From: t0}}}}
	allocs := []usage.Alloc{{Key: "p", Team: "a", Namespace: "ns-a", Start: t0, End: t0.Add(time.Hour), Accelerators: 1}}
	hours := usage.Integrate(t0, t0.Add(time.Hour), allocs, wls, nil)
	if len(hours) != 1 || hours[0].InstanceType != usage.NoInstanceType || hours[0].Pending != 1 || hours[0].Running != 1 ||
		hours[0].BorrowedAccelSeconds != 3600 {
		t.Errorf("hours = %+v; want one row under %q with the pending workload and the pod", hours, usage.NoInstanceType)
	}
}

// TestIntegrateGuaranteeAcrossNamespaces: a team's namespaces share its
// guarantee on an instance type, and the pods that started earliest hold
// it (ties by key), whichever namespace they run in; the rest borrow.
// The rows are per namespace, so which pods hold the guarantee decides
// which namespace's line is charged as guaranteed (cheaper) or borrowed.
func TestIntegrateGuaranteeAcrossNamespaces(t *testing.T) {
	const ns1, ns2, ns3 = "hyperpod-ns-red-train", "hyperpod-ns-red-infer", "hyperpod-ns-red-eval"
	g := usage.Guarantees{red: {p5: 8}}

	// The figures by hand first: guarantee 8; A holds 8 GPUs in ns1 from
	// 10:00, B asks for 4 in ns2 from 10:30. A started first and fills the
	// guarantee all hour: ns1 8 x 3600 = 28,800 guaranteed; B borrows all
	// of its 4 x 1800 = 7,200 and ns2 gets no guaranteed second.
	allocs := []usage.Alloc{
		{Key: "a", Team: red, Namespace: ns1, InstanceType: p5, Accelerators: 8, Start: at("10h")},
		{Key: "b", Team: red, Namespace: ns2, InstanceType: p5, Accelerators: 4, Start: at("10h30m")},
	}
	got := usage.Integrate(at("10h"), at("11h"), allocs, nil, g.History())
	want := []usage.Hour{
		hour(red, ns2, p5, at("10h"), 0, 7200, 0, 0, 1, 0, 0),
		hour(red, ns1, p5, at("10h"), 28800, 0, 0, 0, 1, 0, 0),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("A (8 from 10:00, ns1) and B (4 from 10:30, ns2) under a guarantee of 8:\ngot\n%+v\nwant\n%+v", got, want)
	}

	// Then cases where pods end, start again and tie, against the rule
	// applied second by second (accelGuaranteeOracle).
	cases := []struct {
		name   string
		g      usage.Guarantees
		allocs []usage.Alloc
	}{{
		// A leaves at 10:40: B, the earliest then running, takes 8 of the
		// guarantee; C (10:50, ns3) borrows; D starts at 10:20 like B
		// but its key sorts after B's, so D waits behind B for the
		// guarantee.
		name: "three namespaces, one leaves, a tie on start",
		g:    usage.Guarantees{red: {p5: 10}},
		allocs: []usage.Alloc{
			{Key: "a", Team: red, Namespace: ns1, InstanceType: p5, Accelerators: 6, Start: at("10h"), End: at("10h40m")},
			{Key: "b", Team: red, Namespace: ns2, InstanceType: p5, Accelerators: 8, Start: at("10h20m"), End: at("12h")},
			{Key: "d", Team: red, Namespace: ns1, InstanceType: p5, Accelerators: 2, Start: at("10h20m"), End: at("11h45m")},
			{Key: "c", Team: red, Namespace: ns3, InstanceType: p5, Accelerators: 4, Start: at("10h50m")},
		},
	}, {
		// Blue's pod in red's namespace names is another team: it never
		// takes red's guarantee, and red's pods never take blue's.
		name: "two teams, each with its own guarantee",
		g:    usage.Guarantees{red: {p5: 8}, blue: {p5: 4}},
		allocs: []usage.Alloc{
			{Key: "x", Team: blue, Namespace: blueNS, InstanceType: p5, Accelerators: 8, Start: at("9h50m"), End: at("11h10m")},
			{Key: "a", Team: red, Namespace: ns1, InstanceType: p5, Accelerators: 4, Start: at("10h05m"), End: at("10h55m")},
			{Key: "b", Team: red, Namespace: ns2, InstanceType: p5, Accelerators: 8, Start: at("10h10m")},
			{Key: "y", Team: blue, Namespace: blueNS, InstanceType: p5, Accelerators: 2, Start: at("10h15m"), End: at("10h30m")},
		},
	}}
	for i := range 20 {
		cases = append(cases, struct {
			name   string
			g      usage.Guarantees
			allocs []usage.Alloc
		}{fmt.Sprintf("seeded %d", i), usage.Guarantees{red: {p5: 16}}, seededAllocs(i, ns1, ns2, ns3)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from, until := at("10h"), at("12h30m")
			want := accelGuaranteeOracle(from, until, tc.allocs, tc.g)
			got := map[nsHour][2]int64{}
			for _, h := range usage.Integrate(from, until, tc.allocs, nil, tc.g.History()) {
				if h.GuaranteedAccelSeconds != 0 || h.BorrowedAccelSeconds != 0 {
					got[nsHour{h.Team, h.Namespace, h.Start.Unix()}] = [2]int64{h.GuaranteedAccelSeconds, h.BorrowedAccelSeconds}
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("[guaranteed borrowed] per namespace and hour:\ngot  %v\nwant %v", got, want)
			}
		})
	}
}

type nsHour struct {
	team, ns string
	hour     int64
}

// accelGuaranteeOracle applies the guarantee rule one second at a time,
// the slow and obvious way: in each second, the team's running pods (on
// p5) sorted by start and then key take the guarantee in that order, each
// as much of it as is left; what a pod does not get it borrows. The sums
// are [guaranteed, borrowed] accelerator-seconds per team, namespace and
// hour, leaving out rows with neither.
func accelGuaranteeOracle(from, until time.Time, allocs []usage.Alloc, g usage.Guarantees) map[nsHour][2]int64 {
	out := map[nsHour][2]int64{}
	for t := from.Unix(); t < until.Unix(); t++ {
		var running []usage.Alloc
		for _, a := range allocs {
			if a.Start.Unix() <= t && (a.End.IsZero() || t < a.End.Unix()) {
				running = append(running, a)
			}
		}
		sort.Slice(running, func(i, j int) bool {
			if !running[i].Start.Equal(running[j].Start) {
				return running[i].Start.Before(running[j].Start)
			}
			return running[i].Key < running[j].Key
		})
		left := map[string]int64{}
		for team, byType := range g {
			left[team] = byType[p5]
		}
		for _, a := range running {
			in := min(left[a.Team], a.Accelerators)
			left[a.Team] -= in
			k := nsHour{a.Team, a.Namespace, t - (t-from.Unix())%3600}
			v := out[k]
			v[0] += in
			v[1] += a.Accelerators - in
			out[k] = v
		}
	}
	for k, v := range out {
		if v == [2]int64{} {
			delete(out, k)
		}
	}
	return out
}

// seededAllocs is a reproducible mix of 6 pods of team red spread over the
// three namespaces, starting and ending on whole seconds between 9:30 and
// 12:30 (some still running), with 1 to 8 accelerators each; some share a
// start second.
func seededAllocs(seed int, namespaces ...string) []usage.Alloc {
	r := rand.New(rand.NewPCG(uint64(seed), 39))
	keys := r.Perm(6) // unique keys, not in start order
	var out []usage.Alloc
	for i := range 6 {
		start := at("9h30m").Add(time.Duration(r.IntN(3*3600)) * time.Second)
		if i > 0 && r.IntN(4) == 0 {
			start = out[r.IntN(i)].Start
		}
		a := usage.Alloc{Key: fmt.Sprintf("pod-%d", keys[i]), Team: red, Namespace: namespaces[r.IntN(len(namespaces))],
			InstanceType: p5, Accelerators: 1 + r.Int64N(8), Start: start}
		if r.IntN(4) > 0 {
			a.End = start.Add(time.Duration(1+r.IntN(2*3600)) * time.Second)
		}
		out = append(out, a)
	}
	return out
}

// Issue 38: each second is split by the guarantee in force at that second.
// Red's guarantee goes from 16 to 24 GPUs at 18:37:20 (an amendment applied
// mid-hour). A holds 16 GPUs all hour and fills the guarantee first; B
// holds 8 from 18:10: borrowed until 18:37:20, guaranteed after.
func TestIntegrateSplitsByTheGuaranteeInForce(t *testing.T) {
	amended := at("18h37m20s")
	g := usage.GuaranteeHistory{}
	g.Add(red, p5, time.Time{}, 16)
	g.Add(red, p5, amended, 24)
	allocs := []usage.Alloc{
		{Key: "a", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 16, Start: at("18h"), End: at("19h")},
		{Key: "b", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 8, Start: at("18h10m"), End: at("19h")},
	}
	before := int64(amended.Sub(at("18h10m")) / time.Second) // B's seconds before the amendment: 1640
	after := int64(at("19h").Sub(amended) / time.Second)     // and after it: 1360
	want := []usage.Hour{hour(red, redNS, p5, at("18h"), 16*3600+8*after, 8*before, 0, 0, 2, 0, 0)}
	if got := usage.Integrate(at("18h"), at("19h"), allocs, nil, g); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	// The guarantee before the first step is none: all borrowed.
	late := usage.GuaranteeHistory{}
	late.Add(red, p5, at("19h"), 24)
	want = []usage.Hour{hour(red, redNS, p5, at("18h"), 0, 16*3600+8*(before+after), 0, 0, 2, 0, 0)}
	if got := usage.Integrate(at("18h"), at("19h"), allocs, nil, late); !reflect.DeepEqual(got, want) {
		t.Errorf("before the first step: got\n%+v\nwant\n%+v", got, want)
	}
}

// A pod or a wait that ended exactly at an hour's start is not in that
// hour: recomputing from that hour (what the collector does after a
// restart, issue 38) gives the rows the whole computation gives.
func TestIntegrateEndOnTheHour(t *testing.T) {
	allocs := []usage.Alloc{{Key: "a", Team: red, Namespace: redNS, InstanceType: p5, Accelerators: 8, Start: at("10h30m"), End: at("11h")}}
	wls := []usage.Workload{{Key: "w", Team: red, Namespace: redNS, InstanceType: p5, Pending: []usage.Span{{From: at("10h10m"), To: at("11h")}}}}
	g := usage.Guarantees{red: {p5: 8}}.History()
	if got := usage.Integrate(at("11h"), at("12h"), allocs, wls, g); len(got) != 0 {
		t.Errorf("from 11h: %+v, want no rows", got)
	}
	want := []usage.Hour{hour(red, redNS, p5, at("10h"), 8*1800, 0, 0, 0, 1, 1, 0)}
	if got := usage.Integrate(at("10h"), at("12h"), allocs, wls, g); !reflect.DeepEqual(got, want) {
		t.Errorf("from 10h:\n%+v\nwant\n%+v", got, want)
	}
}
