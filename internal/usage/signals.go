package usage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// SignalKind is one of the five watched signals of mission.md
// ("Observability as a loop"), split where a page shows them apart, and the
// cost jump of issue 13's review triggers.
type SignalKind string

const (
	// SignalCapacity: cluster capacity and accelerator utilization
	// (cluster-wide; allocation, since utilization needs Prometheus).
	SignalCapacity SignalKind = "capacity"
	// SignalAllocation: a team's allocation against its guarantee.
	SignalAllocation SignalKind = "allocation"
	// SignalUtilization: how busy the GPUs a team holds really are
	// (Prometheus), against the contract's floor: the utilization half of
	// "allocation vs utilization per team".
	SignalUtilization SignalKind = "utilization"
	// SignalWaitTime: task run and wait times (a team's).
	SignalWaitTime SignalKind = "wait-time"
	// SignalPreemption: pending and preempted tasks (a team's).
	SignalPreemption SignalKind = "preemption"
	// SignalNodeHealth: node health and recovery events (cluster-wide).
	SignalNodeHealth SignalKind = "node-health"
	// SignalCostJump: a team's accelerator-hours (what chargeback charges
	// for) rose sharply week over week (issue 13's "cost jump").
	SignalCostJump SignalKind = "cost-jump"
	// SignalKueueAccount: Kueue's account of a ClusterQueue's borrowing
	// and the portal's disagree (cluster-wide: the admins look into it;
	// EvaluateKueueAccount).
	SignalKueueAccount SignalKind = "kueue-account"
)

// SignalKinds in the order pages list them.
var SignalKinds = []SignalKind{SignalCapacity, SignalAllocation, SignalUtilization, SignalWaitTime, SignalPreemption, SignalCostJump, SignalNodeHealth, SignalKueueAccount}

// Title is the signal's name as mission.md writes it.
func (k SignalKind) Title() string {
	switch k {
	case SignalCapacity:
		return "Cluster capacity and accelerator utilization"
	case SignalAllocation:
		return "Allocation vs utilization"
	case SignalUtilization:
		return "Utilization below the contract's floor"
	case SignalWaitTime:
		return "Task run and wait times"
	case SignalPreemption:
		return "Pending and preempted tasks"
	case SignalNodeHealth:
		return "Node health and recovery events"
	case SignalCostJump:
		return "Cost jump"
	case SignalKueueAccount:
		return "Kueue's borrowing and the portal's disagree"
	}
	return string(k)
}

// Team reports whether the signal is a team's (else the cluster's).
func (k SignalKind) Team() bool {
	return k == SignalAllocation || k == SignalUtilization || k == SignalWaitTime || k == SignalPreemption || k == SignalCostJump
}

// keywords match a contract's free-text signal name to a kind.
var keywords = map[SignalKind][]string{
	SignalAllocation:  {"allocation", "utilization", "utilisation", "idle", "guarantee"},
	SignalUtilization: {"utilization", "utilisation"},
	SignalWaitTime:    {"wait", "run time", "runtime"},
	SignalPreemption:  {"preempt", "pending"},
	SignalCostJump:    {"cost", "spend", "budget"},
}

// Thresholds are when the signals fire.
type Thresholds struct {
	// IdleGuaranteeDays and IdleGuaranteePercent: a team's guarantee is
	// idle when, over the last IdleGuaranteeDays, it held less than
	// IdleGuaranteePercent of its guaranteed accelerator-hours.
	IdleGuaranteeDays    int
	IdleGuaranteePercent int64
	// PreemptionsPerDay: more preempted tasks than this in the last 24
	// hours fires.
	PreemptionsPerDay int
	// WaitP90: an hour's p90 wait above this in the last 24 hours fires.
	WaitP90 time.Duration
	// CapacityDays and IdleCapacityPercent: more than IdleCapacityPercent
	// of the cluster's accelerator-hours idle over the last CapacityDays.
	CapacityDays        int
	IdleCapacityPercent int64
	// UtilizationDays and UtilizationFloorPercent: a team's GPUs were, on
	// average weighted by the GPU-hours it held, less than
	// UtilizationFloorPercent busy over the last UtilizationDays. A
	// contract whose utilization signal states a floor ("below 40%")
	// overrides the percentage (ContractFloor).
	UtilizationDays         int
	UtilizationFloorPercent int
	// UnhealthyWindow: any node-second not Schedulable in the hours that
	// start within this window before now fires.
	UnhealthyWindow time.Duration
	// CostJumpDays, CostJumpPercent and CostJumpMinHours: the
	// accelerator-hours a team used (guaranteed and borrowed, what
	// chargeback charges for) over the last CostJumpDays rose, against the
	// CostJumpDays before, by more than CostJumpPercent and by at least
	// CostJumpMinHours accelerator-hours (so that a small team going from
	// 1 to 2 hours does not fire).
	CostJumpDays     int
	CostJumpPercent  int64
	CostJumpMinHours int64
	// KueueAccountWindow: Kueue's borrowed quota and the portal's borrowed
	// accelerators differing for longer than this fires
	// (EvaluateKueueAccount says why the tolerance is a time).
	KueueAccountWindow time.Duration
}

// DefaultThresholds are the portal's thresholds.
var DefaultThresholds = Thresholds{
	IdleGuaranteeDays: 14, IdleGuaranteePercent: 10,
	PreemptionsPerDay: 3, WaitP90: time.Hour,
	CapacityDays: 7, IdleCapacityPercent: 50,
	UtilizationDays: 7, UtilizationFloorPercent: 30,
	UnhealthyWindow: 2 * time.Hour,
	CostJumpDays:    7, CostJumpPercent: 50, CostJumpMinHours: 24,
	// Ten minutes: well past a pod's default termination grace period
	// (30 s) and the seconds kube-scheduler takes to place an admitted
	// workload's pods, short enough to be seen the same hour.
	KueueAccountWindow: 10 * time.Minute,
}

// Window is how far back the signals read rows (the cost jump reads two
// windows of CostJumpDays).
func (t Thresholds) Window() time.Duration {
	return time.Duration(max(t.IdleGuaranteeDays, t.CapacityDays, t.UtilizationDays, 2*t.CostJumpDays, 1)) * 24 * time.Hour
}

// SignalState is a signal's current status.
type SignalState string

const (
	SignalOK     SignalState = "ok"
	SignalFiring SignalState = "firing"
	// SignalNoData: too little was recorded in the window to judge (the
	// collector has not run long enough, or no task was admitted).
	SignalNoData SignalState = "no-data"
)

// SignalStatus is one signal of one team (Team "" for the cluster's) now.
type SignalStatus struct {
	Kind      SignalKind
	Team      string
	State     SignalState
	Threshold string // when it fires, in words
	Current   string // what was measured
	Intent    string // what the contract (or the platform) intends
	// Owner and Response: the contract's signal of this kind if it names
	// one, else the contract's operations owner; the platform's admins for
	// the cluster's signals.
	Owner, Response string
}

// TeamInput is what a team's signals are computed from: its approved
// contract, the accelerators of each instance type, and its hourly rows.
type TeamInput struct {
	Contract     workflow.Contract
	Accelerators map[string]int
	Hours        []Hour // the team's rows, any namespace and instance type
	Utilization  UtilizationSeries
}

// coverage is how many distinct hours in [from, to) the collector
// recorded (cluster rows exist for every hour it ran).
func coverage(cluster []ClusterHour, from, to time.Time) int {
	seen := map[time.Time]bool{}
	for _, c := range cluster {
		if !c.Start.Before(from) && c.Start.Before(to) {
			seen[c.Start] = true
		}
	}
	return len(seen)
}

// covered: at least half of the window's hours were recorded.
func covered(cluster []ClusterHour, from, to time.Time) bool {
	return int64(coverage(cluster, from, to))*2 >= int64(to.Sub(from)/time.Hour)
}

// EvaluateTeam computes a team's five signals at now from its rows and the
// cluster's rows (whose hours say when the collector was running).
func EvaluateTeam(in TeamInput, cluster []ClusterHour, now time.Time, th Thresholds) []SignalStatus {
	c := in.Contract
	now = now.UTC()
	end := HourStart(now) // whole hours only: the current one is still being counted
	out := []SignalStatus{}
	// Allocation vs guarantee: guaranteed accelerator-seconds held over
	// the window against the guarantee × the window.
	{
		from := end.Add(-time.Duration(th.IdleGuaranteeDays) * 24 * time.Hour)
		var guarantee int64
		var parts []string
		for _, g := range c.Scheduling.Guaranteed {
			guarantee += int64(g.Count) * int64(in.Accelerators[g.InstanceType])
			parts = append(parts, g.String())
		}
		s := SignalStatus{Kind: SignalAllocation, Team: c.Team,
			Threshold: fmt.Sprintf("fires when the team held less than %d%% of its guaranteed accelerator-hours over %d days", th.IdleGuaranteePercent, th.IdleGuaranteeDays),
			Intent:    "guarantee " + orNone(strings.Join(parts, ", ")) + fmt.Sprintf(" (%d accelerators)", guarantee)}
		possible := guarantee * int64(end.Sub(from)/time.Second)
		var held int64
		for _, h := range in.Hours {
			if !h.Start.Before(from) && h.Start.Before(end) {
				held += h.GuaranteedAccelSeconds
			}
		}
		switch {
		case guarantee == 0:
			s.State, s.Current = SignalOK, "no guarantee to leave idle"
		case !covered(cluster, from, end):
			s.State, s.Current = SignalNoData, fmt.Sprintf("only %d of the last %d hours were recorded", coverage(cluster, from, end), int(end.Sub(from)/time.Hour))
		default:
			s.Current = fmt.Sprintf("held %s of %s guaranteed accelerator-hours (%s)", hours(held), hours(possible), percent(held, possible))
			s.State = SignalOK
			if held*100 < th.IdleGuaranteePercent*possible {
				s.State = SignalFiring
			}
		}
		out = append(out, s)
	}
	out = append(out, EvaluateUtilization(c, in.Hours, in.Utilization, now, th))
	day := end.Add(-24 * time.Hour)
	// Wait times: the worst hourly p90 of the last 24 hours.
	{
		s := SignalStatus{Kind: SignalWaitTime, Team: c.Team,
			Threshold: fmt.Sprintf("fires when an hour's p90 wait (creation to admission) in the last 24 hours exceeds %s", th.WaitP90),
			Intent:    fmt.Sprintf("preemption %s, fair-share weight %d", c.Scheduling.Preemption, c.Scheduling.FairShareWeight)}
		worst := int64(-1)
		for _, h := range in.Hours {
			if !h.Start.Before(day) && h.Start.Before(end) && h.WaitP90Seconds > worst {
				worst = h.WaitP90Seconds
			}
		}
		switch {
		case worst < 0:
			s.State, s.Current = SignalNoData, "no task was admitted in the last 24 hours"
		default:
			s.Current = "worst hourly p90 wait " + (time.Duration(worst) * time.Second).String()
			s.State = SignalOK
			if time.Duration(worst)*time.Second > th.WaitP90 {
				s.State = SignalFiring
			}
		}
		out = append(out, s)
	}
	// Pending and preempted: preempted tasks in the last 24 hours.
	{
		s := SignalStatus{Kind: SignalPreemption, Team: c.Team,
			Threshold: fmt.Sprintf("fires when more than %d tasks were preempted in the last 24 hours", th.PreemptionsPerDay),
			Intent:    fmt.Sprintf("preemption %s, priority classes %s", c.Scheduling.Preemption, orNone(strings.Join(c.Scheduling.PriorityClasses, ", ")))}
		preempted, peakPending := 0, 0
		for _, h := range in.Hours {
			if !h.Start.Before(day) && h.Start.Before(end) {
				preempted += h.Preempted
				peakPending = max(peakPending, h.Pending)
			}
		}
		if !covered(cluster, day, end) {
			s.State, s.Current = SignalNoData, fmt.Sprintf("only %d of the last 24 hours were recorded", coverage(cluster, day, end))
		} else {
			s.Current = fmt.Sprintf("%d preempted, at most %d pending in an hour", preempted, peakPending)
			s.State = SignalOK
			if preempted > th.PreemptionsPerDay {
				s.State = SignalFiring
			}
		}
		out = append(out, s)
	}
	out = append(out, costJump(c.Team, in.Hours, cluster, end, th))
	for i := range out {
		out[i].Owner, out[i].Response = ownerOf(c, out[i].Kind)
	}
	return out
}

// costJump compares the accelerator-hours the team used (guaranteed plus
// borrowed: what chargeback charges for, at each instance type's rate) in
// the last th.CostJumpDays whole days before end with the th.CostJumpDays
// before. Windows of whole weeks hold every weekday once, so a team's
// weekly rhythm does not fire. A rise of exactly th.CostJumpPercent does
// not fire (more than it does); a rise of exactly th.CostJumpMinHours
// does (at least). A team that used nothing in the earlier window does
// not fire: that is a start (a newly approved connection's first busy
// week), not a jump, and would open a review of every new connection.
//
// It counts accelerator-hours, not money: prices are per instance type on
// the rate card, and accelerator-hours are the driver of the team's cost.
// Neither window is scaled for unrecorded hours: a window less than half
// recorded is no judgement.
func costJump(team string, rows []Hour, cluster []ClusterHour, end time.Time, th Thresholds) SignalStatus {
	span := time.Duration(th.CostJumpDays) * 24 * time.Hour
	mid, from := end.Add(-span), end.Add(-2*span)
	s := SignalStatus{Kind: SignalCostJump, Team: team,
		Threshold: fmt.Sprintf("fires when the accelerator-hours the team used (guaranteed and borrowed) in the last %d days rose by more than %d%% and by at least %d accelerator-hours against the %d days before",
			th.CostJumpDays, th.CostJumpPercent, th.CostJumpMinHours, th.CostJumpDays),
		Intent: "accelerator-hours drive the team's cost (chargeback prices them per instance type on the rate card); a sharp rise opens a review of the team's connections"}
	var recent, before int64
	for _, h := range rows {
		switch {
		case !h.Start.Before(mid) && h.Start.Before(end):
			recent += h.AccelSeconds()
		case !h.Start.Before(from) && h.Start.Before(mid):
			before += h.AccelSeconds()
		}
	}
	days := th.CostJumpDays
	switch {
	case !covered(cluster, from, mid):
		s.State, s.Current = SignalNoData, fmt.Sprintf("only %d of the %d hours of the %d days before the last %d were recorded", coverage(cluster, from, mid), int(span/time.Hour), days, days)
	case !covered(cluster, mid, end):
		s.State, s.Current = SignalNoData, fmt.Sprintf("only %d of the last %d hours were recorded", coverage(cluster, mid, end), int(span/time.Hour))
	default:
		rise := recent - before
		change := "up from none: a start, not a jump"
		if before > 0 {
			change = fmt.Sprintf("%+d%%", rise*100/before)
		} else if recent == 0 {
			change = "no change"
		}
		s.Current = fmt.Sprintf("used %s accelerator-hours in the last %d days against %s in the %d days before (%s)", hours(recent), days, hours(before), days, change)
		s.State = SignalOK
		if before > 0 && rise*100 > th.CostJumpPercent*before && rise >= th.CostJumpMinHours*3600 {
			s.State = SignalFiring
		}
	}
	return s
}

// EvaluateCluster computes the cluster's two signals at now. owner is who
// answers for the cluster (the platform's admins).
func EvaluateCluster(cluster []ClusterHour, now time.Time, th Thresholds, owner string) []SignalStatus {
	now = now.UTC()
	end := HourStart(now)
	out := []SignalStatus{}
	{
		from := end.Add(-time.Duration(th.CapacityDays) * 24 * time.Hour)
		s := SignalStatus{Kind: SignalCapacity,
			Threshold: fmt.Sprintf("fires when more than %d%% of the cluster's accelerator-hours were idle over %d days", th.IdleCapacityPercent, th.CapacityDays),
			Intent:    "the teams' guarantees and borrowing keep the cluster busy (utilization from Prometheus is not read here: allocation only)"}
		var capacity, idle int64
		for _, c := range cluster {
			if !c.Start.Before(from) && c.Start.Before(end) {
				capacity += c.CapacityAccelSeconds
				idle += c.IdleAccelSeconds()
			}
		}
		switch {
		case !covered(cluster, from, end) || capacity == 0:
			s.State, s.Current = SignalNoData, fmt.Sprintf("only %d of the last %d hours were recorded", coverage(cluster, from, end), int(end.Sub(from)/time.Hour))
		default:
			s.Current = fmt.Sprintf("%s of %s accelerator-hours idle (%s)", hours(idle), hours(capacity), percent(idle, capacity))
			s.State = SignalOK
			if idle*100 > th.IdleCapacityPercent*capacity {
				s.State = SignalFiring
			}
		}
		out = append(out, s)
	}
	{
		from := end.Add(-th.UnhealthyWindow)
		s := SignalStatus{Kind: SignalNodeHealth,
			Threshold: fmt.Sprintf("fires on any node-second not Schedulable (HyperPod's health label) in the last %s", th.UnhealthyWindow),
			Intent:    "every node Schedulable; HyperPod reboots or replaces failed ones"}
		var bad int64
		for _, c := range cluster {
			// The current hour counts too: a node that just failed matters now.
			if !c.Start.Before(from) {
				bad += c.UnhealthyNodeSeconds
			}
		}
		if coverage(cluster, from, now.Add(time.Hour)) == 0 {
			s.State, s.Current = SignalNoData, "no node was recorded in the window"
		} else {
			s.Current = fmt.Sprintf("%d unhealthy node-seconds", bad)
			s.State = SignalOK
			if bad > 0 {
				s.State = SignalFiring
			}
		}
		out = append(out, s)
	}
	for i := range out {
		out[i].Owner, out[i].Response = owner, "Cluster admins: check /admin/cluster and the nodes; follow HyperPod's reboot or replacement."
	}
	return out
}

// ownerOf finds the contract's signal of kind k by its name (the title or
// a keyword), else falls back to the operations owner (the cost owner for
// the cost jump, when the contract names one).
func ownerOf(c workflow.Contract, k SignalKind) (owner, response string) {
	for _, s := range c.Signals {
		name := strings.ToLower(s.Name)
		if strings.EqualFold(s.Name, k.Title()) || slices.ContainsFunc(keywords[k], func(w string) bool { return strings.Contains(name, w) }) {
			return s.Owner, s.Response
		}
	}
	if k == SignalCostJump && c.CostOwner != "" {
		return c.CostOwner, "No response named in the contract: the cost owner decides."
	}
	return c.OperationsOwner, "No response named in the contract: the operations owner decides."
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// hours renders accelerator-seconds as hours with one decimal.
func hours(sec int64) string {
	return fmt.Sprintf("%d.%d", sec/3600, sec%3600*10/3600)
}

func percent(a, b int64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d%%", a*100/b)
}
