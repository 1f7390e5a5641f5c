package usage

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The floor a contract states, read conservatively: only from a signal
// about utilization, a whole percentage 1-100 after "below", "under",
// "less than" or "<", the name before the response, and nothing when a
// text states two different floors.
func TestContractFloor(t *testing.T) {
	for _, tc := range []struct {
		name, response string
		want           int
		ok             bool
	}{
		{"GPU utilisation below 30% for a week", "Shrink the guarantee.", 30, true},
		{"Accelerator utilization", "Below 40% for 7 days: propose a smaller guarantee at the next review.", 40, true},
		{"GPU utilization under 25 %", "", 25, true},
		{"Utilization less than 15%", "", 15, true},
		{"Utilization < 20%", "", 20, true},
		{"Utilization below 25%", "Below 40% for 7 days", 25, true}, // the name first
		{"Utilization below 30% or under 30%", "", 30, true},        // the same floor twice
		{"Utilization below 30% and under 40%", "", 0, false},       // which one?
		{"Utilization below 30.5%", "", 0, false},
		{"Utilization below 0%", "", 0, false},
		{"Utilization below 150%", "", 0, false},
		{"Utilization above 90%", "", 0, false},
		{"Utilization", "Review quarterly.", 0, false},
		{"Wait times below 30%", "", 0, false},   // not about utilization
		{"Utilization", "Thunder 30%", 0, false}, // "under" inside a word
	} {
		c := workflow.ExampleContract()
		c.Signals = []workflow.Signal{{Name: tc.name, Owner: "x@example.test", Response: tc.response}}
		got, sig, ok := ContractFloor(c)
		if got != tc.want || ok != tc.ok || ok && sig.Name != tc.name {
			t.Errorf("%q / %q: floor %d, %v (%q); want %d, %v", tc.name, tc.response, got, ok, sig.Name, tc.want, tc.ok)
		}
	}
}

// Two namespaces in one hour: hyperpod-ns-red holds 4 GPUs (14,400
// GPU-seconds) at 20%, hyperpod-ns-red-b 2 GPUs (7,200) at 50%: the
// GPU-time-weighted mean is (14,400×20 + 7,200×50) / 21,600 = 30%, exactly
// the default floor, which does not fire. With b at 44% the mean is
// (288,000 + 316,800) / 21,600 = 28% and fires, though the plain mean of
// the two namespaces (32%) would not.
func TestUtilizationSignal(t *testing.T) {
	c := workflow.ExampleContract()
	c.Signals = []workflow.Signal{{Name: "GPU utilization", Owner: "ops.red@example.test", Response: "Look at the jobs."}}
	h1, h2 := sigEnd.Add(-time.Hour), sigEnd.Add(-2*time.Hour)
	from := sigEnd.Add(-7 * 24 * time.Hour)
	row := func(ns string, at time.Time, sec int64) Hour {
		return Hour{Team: "red", Namespace: ns, InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: sec, WaitP90Seconds: -1}
	}
	const a, b = "hyperpod-ns-red", "hyperpod-ns-red-b"
	base := []Hour{row(a, h1, 14_400), row(b, h1, 7_200)}
	pts := func(aPct, bPct float64) map[string][]Point {
		return map[string][]Point{a: {{At: h1, Percent: aPct}}, b: {{At: h1, Percent: bPct}}}
	}
	on := func(p map[string][]Point) UtilizationSeries { return UtilizationSeries{Configured: true, Points: p} }
	for _, tc := range []struct {
		name    string
		rows    []Hour
		u       UtilizationSeries
		want    SignalState
		current string
	}{
		{"weighted mean exactly at the floor", base, on(pts(20, 50)), SignalOK, "mean utilization 30.0% over 6.0 accelerator-hours with a reading (of 6.0 held)"},
		{"weighted mean under the floor", base, on(pts(20, 44)), SignalFiring, "mean utilization 28.0%"},
		// a holds 4 GPUs in h2 too, without a point: not a zero (which
		// would make it 648,000 / 36,000 = 18%); 6 of 10 GPU-hours read.
		{"an hour without a point is not zero", append([]Hour{row(a, h2, 14_400)}, base...), on(pts(20, 50)), SignalOK, "(of 10.0 held)"},
		// 8 GPUs in h2 unread: 6 of 14 GPU-hours read, less than half.
		{"too little read", append([]Hour{row(a, h2, 28_800)}, base...), on(pts(20, 50)), SignalNoData, "only 6.0 of the 14.0"},
		// A point where the namespace held nothing weighs nothing.
		{"a point without allocation", base, on(map[string][]Point{a: {{At: h1, Percent: 20}, {At: h2, Percent: 0}}, b: {{At: h1, Percent: 50}}}), SignalOK, "30.0%"},
		// A repeated point is counted once.
		{"a repeated point", base, on(map[string][]Point{a: {{At: h1, Percent: 20}, {At: h1, Percent: 20}}, b: {{At: h1, Percent: 50}}}), SignalOK, "30.0% over 6.0"},
		// The current hour and the hour before the window do not count.
		{"outside the window", append([]Hour{row(a, sigEnd, 36_000), row(a, from.Add(-time.Hour), 36_000)}, base...),
			on(map[string][]Point{a: {{At: h1, Percent: 20}, {At: sigEnd, Percent: 0}, {At: from.Add(-time.Hour), Percent: 0}}, b: {{At: h1, Percent: 50}}}), SignalOK, "(of 6.0 held)"},
		{"the window's first hour counts", []Hour{row(a, from, 3_600)}, on(map[string][]Point{a: {{At: from, Percent: 10}}}), SignalFiring, "10.0%"},
		{"no source", base, UtilizationSeries{Points: pts(0, 0)}, SignalNoData, "needs --prometheus-url"},
		{"the source failed", base, UtilizationSeries{Configured: true, Err: errors.New("connection refused")}, SignalNoData, "connection refused"},
		{"nothing held", nil, on(pts(0, 0)), SignalNoData, "held no accelerator"},
	} {
		got := EvaluateUtilization(c, tc.rows, tc.u, sigNow, DefaultThresholds)
		if got.State != tc.want || !strings.Contains(got.Current, tc.current) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, got.State, got.Current, tc.want, tc.current)
		}
		if got.Kind != SignalUtilization || got.Owner != "ops.red@example.test" || got.Response != "Look at the jobs." {
			t.Errorf("%s: kind %s, owner %q, response %q", tc.name, got.Kind, got.Owner, got.Response)
		}
	}
	// Without a floor in the contract: the default, said so.
	got := EvaluateUtilization(c, base, on(pts(20, 50)), sigNow, DefaultThresholds)
	if !strings.Contains(got.Threshold, "less than 30% busy over 7 days") || !strings.Contains(got.Intent, "default of 30%") {
		t.Errorf("threshold %q, intent %q", got.Threshold, got.Intent)
	}
	// The example contract's "Accelerator utilization" says "Below 40%
	// for 7 days": 30% fires against its floor, and the page says why.
	got = EvaluateUtilization(workflow.ExampleContract(), base, on(pts(20, 50)), sigNow, DefaultThresholds)
	if got.State != SignalFiring || !strings.Contains(got.Threshold, "less than 40% busy") || !strings.Contains(got.Intent, `states a floor of 40%`) ||
		got.Owner != "member.red@example.test" {
		t.Errorf("contract floor: %s, threshold %q, intent %q, owner %q", got.State, got.Threshold, got.Intent, got.Owner)
	}
	// EvaluateTeam carries it.
	ss := EvaluateTeam(TeamInput{Contract: c, Hours: base, Utilization: on(pts(20, 44))}, recorded(336, 0, 0), sigNow, DefaultThresholds)
	if s := statusOf(t, ss, SignalUtilization); s.State != SignalFiring {
		t.Errorf("EvaluateTeam's utilization = %s", s.State)
	}
}
