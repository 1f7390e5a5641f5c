package usage

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// now is 10:30 on 15 March: whole hours end at 10:00.
var (
	sigNow = time.Date(2026, 3, 15, 10, 30, 0, 0, time.UTC)
	sigEnd = time.Date(2026, 3, 15, 10, 0, 0, 0, time.UTC)
)

// recorded is a cluster row for every hour of the last n hours before
// sigEnd: the collector ran throughout.
func recorded(n int, capacity, allocated int64) []ClusterHour {
	var out []ClusterHour
	for i := 1; i <= n; i++ {
		out = append(out, ClusterHour{Cluster: "c", InstanceType: "ml.p5.48xlarge", Start: sigEnd.Add(-time.Duration(i) * time.Hour),
			CapacityAccelSeconds: capacity, AllocatedAccelSeconds: allocated})
	}
	return out
}

func statusOf(t *testing.T, ss []SignalStatus, k SignalKind) SignalStatus {
	t.Helper()
	for _, s := range ss {
		if s.Kind == k {
			return s
		}
	}
	t.Fatalf("no %s signal in %+v", k, ss)
	return SignalStatus{}
}

// Team red's guarantee is ml.p5.48xlarge × 2 at 8 GPUs each = 16 GPUs;
// over 14 days (336 hours) that is 16 × 336 × 3600 = 19,353,600
// GPU-seconds, and 10% of it 1,935,360: holding one second less fires.
func TestAllocationSignal(t *testing.T) {
	c := workflow.ExampleContract()
	acc := map[string]int{"ml.p5.48xlarge": 8}
	full := recorded(336, 0, 0)
	row := func(at time.Time, held int64) Hour {
		return Hour{Team: "red", InstanceType: "ml.p5.48xlarge", Start: at, GuaranteedAccelSeconds: held, WaitP90Seconds: -1}
	}
	for _, tc := range []struct {
		name    string
		hours   []Hour
		cluster []ClusterHour
		want    SignalState
	}{
		{"one second under 10%", []Hour{row(sigEnd.Add(-time.Hour), 1_935_359)}, full, SignalFiring},
		{"exactly 10%", []Hour{row(sigEnd.Add(-time.Hour), 1_935_360)}, full, SignalOK},
		{"split over two hours", []Hour{row(sigEnd.Add(-time.Hour), 935_360), row(sigEnd.Add(-336*time.Hour), 1_000_000)}, full, SignalOK},
		// Rows before the window and in the current (unfinished) hour do
		// not count.
		{"outside the window", []Hour{row(sigEnd.Add(-337*time.Hour), 9_000_000), row(sigEnd, 9_000_000)}, full, SignalFiring},
		{"nothing held", nil, full, SignalFiring},
		// 167 of 336 hours recorded: less than half, no judgement.
		{"collector too new", nil, recorded(167, 0, 0), SignalNoData},
		{"half recorded", nil, recorded(168, 0, 0), SignalFiring},
	} {
		got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Accelerators: acc, Hours: tc.hours}, tc.cluster, sigNow, DefaultThresholds), SignalAllocation)
		if got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
	c.Scheduling.Guaranteed = nil
	if got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Accelerators: acc}, full, sigNow, DefaultThresholds), SignalAllocation); got.State != SignalOK {
		t.Errorf("no guarantee: %s", got.State)
	}
	got := statusOf(t, EvaluateTeam(TeamInput{Contract: workflow.ExampleContract(), Accelerators: acc, Hours: []Hour{row(sigEnd.Add(-time.Hour), 1_935_359)}}, full, sigNow, DefaultThresholds), SignalAllocation)
	if got.Current != "held 537.5 of 5376.0 guaranteed accelerator-hours (9%)" {
		t.Errorf("current = %q", got.Current)
	}
}

// The worst hourly p90 wait of the last 24 hours against 1 hour.
func TestWaitSignal(t *testing.T) {
	c := workflow.ExampleContract()
	row := func(at time.Time, p90 int64) Hour { return Hour{Team: "red", Start: at, WaitP90Seconds: p90} }
	for _, tc := range []struct {
		name  string
		hours []Hour
		want  SignalState
	}{
		{"one hour exactly", []Hour{row(sigEnd.Add(-time.Hour), 3600), row(sigEnd.Add(-2*time.Hour), 10)}, SignalOK},
		{"one second over", []Hour{row(sigEnd.Add(-24*time.Hour), 3601)}, SignalFiring},
		{"25 hours ago and now do not count", []Hour{row(sigEnd.Add(-25*time.Hour), 9999), row(sigEnd, 9999), row(sigEnd.Add(-time.Hour), 60)}, SignalOK},
		{"nothing admitted", []Hour{row(sigEnd.Add(-time.Hour), -1)}, SignalNoData},
	} {
		if got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Hours: tc.hours}, nil, sigNow, DefaultThresholds), SignalWaitTime); got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
}

// More than 3 preempted tasks in the last 24 hours.
func TestPreemptionSignal(t *testing.T) {
	c := workflow.ExampleContract()
	row := func(at time.Time, n int) Hour {
		return Hour{Team: "red", Start: at, Preempted: n, Pending: 5, WaitP90Seconds: -1}
	}
	day := recorded(24, 0, 0)
	for _, tc := range []struct {
		name    string
		hours   []Hour
		cluster []ClusterHour
		want    SignalState
	}{
		{"three", []Hour{row(sigEnd.Add(-time.Hour), 2), row(sigEnd.Add(-24*time.Hour), 1)}, day, SignalOK},
		{"four", []Hour{row(sigEnd.Add(-time.Hour), 2), row(sigEnd.Add(-24*time.Hour), 2)}, day, SignalFiring},
		{"four, one of them 25 hours ago", []Hour{row(sigEnd.Add(-time.Hour), 3), row(sigEnd.Add(-25*time.Hour), 1)}, day, SignalOK},
		{"not recorded", []Hour{row(sigEnd.Add(-time.Hour), 9)}, recorded(11, 0, 0), SignalNoData},
	} {
		if got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Hours: tc.hours}, tc.cluster, sigNow, DefaultThresholds), SignalPreemption); got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
}

// Over 7 days (168 hours) more than 50% idle fires: capacity 100 and 49
// allocated every hour is 51% idle; 50 allocated is exactly 50%.
func TestCapacitySignal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster []ClusterHour
		want    SignalState
	}{
		{"51% idle", recorded(168, 100, 49), SignalFiring},
		{"50% idle", recorded(168, 100, 50), SignalOK},
		{"too few hours", recorded(83, 100, 0), SignalNoData},
	} {
		if got := statusOf(t, EvaluateCluster(tc.cluster, sigNow, DefaultThresholds, "admins"), SignalCapacity); got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
}

// Any unhealthy node-second in the hours from 08:00 (2 hours before the
// last whole hour) fires, the current hour included.
func TestNodeHealthSignal(t *testing.T) {
	at := func(h int, bad int64) ClusterHour {
		return ClusterHour{Cluster: "c", Start: time.Date(2026, 3, 15, h, 0, 0, 0, time.UTC), UnhealthyNodeSeconds: bad}
	}
	for _, tc := range []struct {
		name    string
		cluster []ClusterHour
		want    SignalState
	}{
		{"healthy", []ClusterHour{at(8, 0), at(9, 0), at(10, 0)}, SignalOK},
		{"one second now", []ClusterHour{at(8, 0), at(10, 1)}, SignalFiring},
		{"at 08:00", []ClusterHour{at(8, 30)}, SignalFiring},
		{"only at 07:00", []ClusterHour{at(7, 500), at(9, 0)}, SignalOK},
		{"nothing recorded", []ClusterHour{at(7, 500)}, SignalNoData},
	} {
		if got := statusOf(t, EvaluateCluster(tc.cluster, sigNow, DefaultThresholds, "admins"), SignalNodeHealth); got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
}

// Owners come from the contract's signals by name, else its operations
// owner; the cluster's signals belong to the platform.
func TestSignalOwners(t *testing.T) {
	c := workflow.ExampleContract()
	c.OperationsOwner = "ops@example.test"
	ss := EvaluateTeam(TeamInput{Contract: c}, nil, sigNow, DefaultThresholds)
	if s := statusOf(t, ss, SignalAllocation); s.Owner != "member.red@example.test" || s.Response != c.Signals[0].Response {
		t.Errorf("allocation (contract's \"Accelerator utilization\"): %s %q", s.Owner, s.Response)
	}
	if s := statusOf(t, ss, SignalPreemption); s.Owner != "member.red@example.test" || s.Response != c.Signals[1].Response {
		t.Errorf("preemption (contract's \"Pending and preempted tasks\"): %s %q", s.Owner, s.Response)
	}
	if s := statusOf(t, ss, SignalWaitTime); s.Owner != "ops@example.test" {
		t.Errorf("wait time (not in the contract): %s, want the operations owner", s.Owner)
	}
	// The cost jump falls back to the cost owner; a contract's signal
	// named for spend, cost or budget answers for it.
	if s := statusOf(t, ss, SignalCostJump); s.Owner != c.CostOwner || !strings.Contains(s.Response, "cost owner") {
		t.Errorf("cost jump (not in the contract): %s %q, want the cost owner", s.Owner, s.Response)
	}
	for _, name := range []string{"Monthly spend", "Cost per week", "Budget overrun"} {
		d := c
		d.Signals = append(slices.Clone(c.Signals), workflow.Signal{Name: name, Owner: "finance@example.test", Response: "Ask finance."})
		if s := statusOf(t, EvaluateTeam(TeamInput{Contract: d}, nil, sigNow, DefaultThresholds), SignalCostJump); s.Owner != "finance@example.test" || s.Response != "Ask finance." {
			t.Errorf("cost jump with the contract's %q: %s %q", name, s.Owner, s.Response)
		}
	}
	for _, s := range EvaluateCluster(nil, sigNow, DefaultThresholds, "platform admins") {
		if s.Owner != "platform admins" || s.Team != "" {
			t.Errorf("%s: owner %q team %q", s.Kind, s.Owner, s.Team)
		}
	}
}

// The cost jump compares the accelerator-hours (guaranteed + borrowed) of
// the last 7 days, 08 Mar 10:00 to 15 Mar 10:00 (168 whole hours), with
// the 7 days before, from 01 Mar 10:00. It fires on a rise of more than
// 50% and of at least 24 accelerator-hours: 100 → 151 hours is +51% and
// +51 hours and fires; 100 → 150 is exactly 50% and does not; 10 → 34 is
// +240% and exactly +24 hours and fires, 10 → 33 (+23 hours) does not.
func TestCostJumpSignal(t *testing.T) {
	c := workflow.ExampleContract()
	const h = 3600
	row := func(ago int, guaranteed, borrowed int64) Hour {
		return Hour{Team: "red", InstanceType: "ml.p5.48xlarge", Start: sigEnd.Add(-time.Duration(ago) * time.Hour),
			GuaranteedAccelSeconds: guaranteed * h, BorrowedAccelSeconds: borrowed * h, WaitP90Seconds: -1}
	}
	both := recorded(336, 0, 0)
	for _, tc := range []struct {
		name    string
		hours   []Hour
		cluster []ClusterHour
		want    SignalState
	}{
		{"100 to 151 hours", []Hour{row(200, 100, 0), row(1, 151, 0)}, both, SignalFiring},
		{"exactly 50% more", []Hour{row(200, 100, 0), row(1, 150, 0)}, both, SignalOK},
		{"40% more", []Hour{row(200, 60, 40), row(1, 100, 40)}, both, SignalOK},
		{"borrowed hours count", []Hour{row(200, 100, 0), row(1, 100, 51)}, both, SignalFiring},
		{"less", []Hour{row(200, 300, 0), row(1, 10, 0)}, both, SignalOK},
		{"10 to 34 hours: exactly 24 more", []Hour{row(200, 10, 0), row(1, 34, 0)}, both, SignalFiring},
		{"10 to 33 hours: under 24 more", []Hour{row(200, 10, 0), row(1, 33, 0)}, both, SignalOK},
		{"from none to 24 hours: a start, not a jump", []Hour{row(1, 0, 24)}, both, SignalOK},
		{"from a little to a lot", []Hour{row(200, 1, 0), row(1, 0, 25)}, both, SignalFiring},
		{"from none to 23 hours", []Hour{row(1, 0, 23)}, both, SignalOK},
		{"nothing used", nil, both, SignalOK},
		// 168 hours ago is the recent window's first hour, 169 the
		// earlier one's last; 336 its first; 337 and the current hour
		// are outside both.
		{"at the windows' edges", []Hour{row(169, 100, 0), row(168, 151, 0)}, both, SignalFiring},
		{"the earlier window's first hour", []Hour{row(336, 100, 0), row(168, 150, 0)}, both, SignalOK},
		{"before the windows", []Hour{row(337, 500, 0), row(200, 100, 0), row(1, 151, 0)}, both, SignalFiring},
		{"the current hour", []Hour{row(200, 100, 0), row(1, 100, 0), row(0, 1000, 0)}, both, SignalOK},
		// The earlier window has hours 169-336 ago: 84 of its 168
		// recorded is half, 83 too few.
		{"the earlier window half recorded", []Hour{row(200, 100, 0), row(1, 151, 0)}, recorded(168+84, 0, 0), SignalFiring},
		{"the earlier window not recorded", []Hour{row(1, 151, 0)}, recorded(168+83, 0, 0), SignalNoData},
		// both[85:] leaves 83 of the last 168 hours.
		{"the last 7 days not recorded", []Hour{row(200, 100, 0), row(1, 151, 0)}, both[85:], SignalNoData},
		{"nothing recorded", []Hour{row(1, 500, 0)}, nil, SignalNoData},
	} {
		if got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Hours: tc.hours}, tc.cluster, sigNow, DefaultThresholds), SignalCostJump); got.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.State, got.Current, tc.want)
		}
	}
	got := statusOf(t, EvaluateTeam(TeamInput{Contract: c, Hours: []Hour{row(200, 100, 0), row(1, 100, 51)}}, both, sigNow, DefaultThresholds), SignalCostJump)
	if got.Current != "used 151.0 accelerator-hours in the last 7 days against 100.0 in the 7 days before (+51%)" || !got.Kind.Team() ||
		!strings.Contains(got.Threshold, "more than 50% and by at least 24 accelerator-hours") || !strings.Contains(got.Intent, "accelerator-hours drive the team's cost") {
		t.Errorf("status = %+v", got)
	}
	got = statusOf(t, EvaluateTeam(TeamInput{Contract: c, Hours: []Hour{row(1, 0, 24)}}, both, sigNow, DefaultThresholds), SignalCostJump)
	if !strings.HasSuffix(got.Current, "against 0.0 in the 7 days before (up from none: a start, not a jump)") {
		t.Errorf("from none: %q", got.Current)
	}
	// The rows are read far enough back for both windows.
	th := DefaultThresholds
	th.CostJumpDays = 10
	if th.Window() != 20*24*time.Hour || DefaultThresholds.Window() < 14*24*time.Hour {
		t.Errorf("Window = %s, default %s; want both cost-jump windows", th.Window(), DefaultThresholds.Window())
	}
}
