package usage

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Alloc is one task's pod holding resources on a node of one instance type,
// from Start to End (End zero: still holding them). The collector makes one
// per pod, keyed by the pod's UID so that recording it again replaces it.
// Times count in whole seconds (the Kubernetes API's timestamps have a
// resolution of one second: metav1.Time serializes as RFC 3339 seconds).
type Alloc struct {
	Key  string // the pod's UID
	Task string // the Kueue Workload the pod belongs to; "" counts the pod as its own task

	Team, Namespace, InstanceType string

	Accelerators int64 // GPUs or Neuron cores requested
	CPUMilli     int64
	MemoryMiB    int64

	Start, End time.Time

	// For the detailed task report: the pod's name, priority class and
	// phase (Running, Succeeded, Failed, or Deleted when it went before it
	// finished).
	Pod, PriorityClass, Status string
}

// Task is one line of the detailed task report (HyperPod's per-task
// report): a Workload, or a pod that belongs to none, with its execution
// window, status, priority class and the accelerator-seconds its pods held
// within the report's period.
type Task struct {
	Task, Team, Namespace, InstanceType, PriorityClass, Status string
	Start, End                                                 time.Time // End zero: still running
	AccelSeconds                                               int64
}

// Span is a half-open period [From, To); To zero means still open.
type Span struct{ From, To time.Time }

// Admission is a Workload being admitted after waiting WaitSeconds (from
// its creation, or from its eviction when readmitted after a preemption).
type Admission struct {
	At          time.Time
	WaitSeconds int64
}

// NoInstanceType is the instance type of rows for what has none yet: a
// Workload waiting without an admission or a node selector naming one, a
// pod on a node the collector has not seen. Never a blank.
const NoInstanceType = "(not assigned)"

// Workload is what the integrator needs of a Kueue Workload's history: when
// it waited for quota, when it was admitted and when it was preempted.
// InstanceType is the flavor it was (or asks to be) admitted to; "" when
// not known yet (its rows then say NoInstanceType).
type Workload struct {
	Key                           string // the Workload's UID
	Name                          string
	Team, Namespace, InstanceType string
	PriorityClass                 string
	Created                       time.Time
	Finished                      time.Time // zero while not finished (or deleted)
	Pending                       []Span
	Admissions                    []Admission
	Preemptions                   []time.Time
}

// NodeSpan is a node of one instance type in one health state over a
// period: Schedulable per HyperPod's health label, offering Accelerators.
type NodeSpan struct {
	Node, InstanceType string
	Accelerators       int64
	Schedulable        bool
	From, To           time.Time // To zero: still in this state
}

// Guarantees is each team's guaranteed quota: team -> instance type ->
// accelerators (instances guaranteed x accelerators per instance).
type Guarantees map[string]map[string]int64

// Integrate computes the hourly rows of every hour from the hour of from
// up to and including the hour of until, clipping open periods at until.
// Accelerator-seconds are split exactly: at each instant the team's
// allocation on an instance type up to the guarantee in force at that
// instant (g, in accelerators) is guaranteed, the rest borrowed; within the
// guarantee, pods that started earlier come first (ties by key), so the
// split per namespace is deterministic and each part a whole number of
// accelerator-seconds. Because each second is split by its own guarantee,
// recomputing an hour gives the same figures whatever changed since,
// except what really changed in it. CPU is not split (IntegrateSplit).
func Integrate(from, until time.Time, allocs []Alloc, wls []Workload, g GuaranteeHistory) []Hour {
	return IntegrateSplit(from, until, allocs, wls, g, nil)
}

// IntegrateSplit is Integrate that also splits CPU the way accelerators
// are split, as HyperPod's usage report splits vCPU hours into allocated
// and borrowed (awslabs/sagemaker-hyperpod-usage-report,
// report_generation/src/hyperpod_usage_report/generators/csv_generator.py:
// the summary's "vCPU" Total/Allocated/Borrowed utilization (hours)):
// at each instant the team's CPU requests on an instance type up to its
// CPU guarantee in force then (cpu, in millicores: the instances guaranteed
// times the vCPUs of one, the ClusterQueue's cpu nominal quota that
// internal/provision applies) are within it, earliest-started pods first,
// and the rest (BorrowedCPUMilliSeconds) borrowed. A nil cpu leaves CPU
// unsplit (BorrowedCPUMilliSeconds 0).
func IntegrateSplit(from, until time.Time, allocs []Alloc, wls []Workload, g, cpu GuaranteeHistory) []Hour {
	lo, hi := HourStart(from).Unix(), until.Unix()
	if hi <= lo {
		return nil
	}
	type rowKey struct {
		team, ns, itype string
		hour            int64
	}
	rows := map[rowKey]*Hour{}
	// The row last looked up: the guarantee sweeps ask for the same row
	// (one team, instance type and namespace, one hour) for every
	// allocation active in a piece, and hashing the key's three strings for
	// each was about two thirds of the integration's CPU in a first flush
	// of 50,000 pods (BenchmarkFlush50kPods's profile: some 1.9 million
	// lookups).
	var last *Hour
	var lastKey rowKey
	row := func(team, ns, itype string, hour int64) *Hour {
		k := rowKey{team, ns, itype, hour}
		if last != nil && k == lastKey {
			return last
		}
		r := rows[k]
		if r == nil {
			r = &Hour{Team: team, Namespace: ns, InstanceType: itype, Start: time.Unix(hour, 0).UTC(),
				WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: SourceCluster}
			rows[k] = r
		}
		last, lastKey = r, k
		return r
	}
	// A task is counted once per row: a Workload running (its pods'
	// Task) or a pod of none running, waiting, or preempted.
	type taskKey struct {
		rowKey
		kind uint8
		id   string
	}
	const (
		runTask uint8 = iota
		runPod
		pending
		preempted
	)
	seen := map[taskKey]bool{}
	count := func(k rowKey, kind uint8, id string, field func(*Hour) *int) {
		tk := taskKey{k, kind, id}
		if !seen[tk] {
			seen[tk] = true
			*field(row(k.team, k.ns, k.itype, k.hour))++
		}
	}

	// The allocations in the window, copied once (the instance type
	// defaulted), then grouped by team and instance type for the
	// guarantee sweep by pointer: appending the 200-byte records to each
	// group, and to the sweep's active set, was most of a recompute's
	// integration (make bench's collector flush, issue 33).
	in := make([]Alloc, 0, len(allocs))
	for _, a := range allocs {
		s, e := clip(a.Start, a.End, lo, hi)
		if empty(a.Start, s, e) {
			continue
		}
		a.InstanceType = cmp.Or(a.InstanceType, NoInstanceType)
		in = append(in, a)
		kind, id := runTask, a.Task
		if id == "" {
			kind, id = runPod, a.Key
		}
		for h := hourOf(s); h < e || h == hourOf(s); h += 3600 {
			count(rowKey{a.Team, a.Namespace, a.InstanceType, h}, kind, id, func(r *Hour) *int { return &r.Running })
		}
		// CPU and memory integrate per hour; CPU's borrowed part is
		// swept below.
		forHours(s, e, func(h, secs int64) {
			r := row(a.Team, a.Namespace, a.InstanceType, h)
			r.CPUMilliSeconds += a.CPUMilli * secs
			r.MemoryMiBSeconds += a.MemoryMiB * secs
		})
	}
	type group struct{ team, itype string }
	groups := map[group][]*Alloc{}
	for i := range in {
		k := group{in[i].Team, in[i].InstanceType}
		groups[k] = append(groups[k], &in[i])
	}
	accel := func(a *Alloc) int64 { return a.Accelerators }
	cpuMilli := func(a *Alloc) int64 { return a.CPUMilli }
	for grp, as := range groups {
		sweep(as, accel, g[grp.team][grp.itype], lo, hi, func(a *Alloc, h, guaranteed, borrowed int64) {
			r := row(a.Team, a.Namespace, a.InstanceType, h)
			r.GuaranteedAccelSeconds += guaranteed
			r.BorrowedAccelSeconds += borrowed
		})
		if cpu != nil {
			sweep(as, cpuMilli, cpu[grp.team][grp.itype], lo, hi, func(a *Alloc, h, _, borrowed int64) {
				row(a.Team, a.Namespace, a.InstanceType, h).BorrowedCPUMilliSeconds += borrowed
			})
		}
	}

	waits := map[rowKey][]int64{}
	for _, w := range wls {
		w.InstanceType = cmp.Or(w.InstanceType, NoInstanceType)
		for _, p := range w.Pending {
			s, e := clip(p.From, p.To, lo, hi)
			if empty(p.From, s, e) {
				continue
			}
			for h := hourOf(s); h < e || h == hourOf(s); h += 3600 {
				count(rowKey{w.Team, w.Namespace, w.InstanceType, h}, pending, w.Key, func(r *Hour) *int { return &r.Pending })
			}
		}
		for _, t := range w.Preemptions {
			if u := t.Unix(); u >= lo && u < hi {
				count(rowKey{w.Team, w.Namespace, w.InstanceType, hourOf(u)}, preempted, w.Key, func(r *Hour) *int { return &r.Preempted })
			}
		}
		for _, ad := range w.Admissions {
			if u := ad.At.Unix(); u >= lo && u < hi {
				k := rowKey{w.Team, w.Namespace, w.InstanceType, hourOf(u)}
				row(k.team, k.ns, k.itype, k.hour)
				waits[k] = append(waits[k], ad.WaitSeconds)
			}
		}
	}
	for k, ws := range waits {
		slices.Sort(ws)
		r := rows[k]
		r.WaitP50Seconds, r.WaitP90Seconds, r.WaitP99Seconds = waitPercentile(ws, 50), waitPercentile(ws, 90), waitPercentile(ws, 99)
	}

	out := make([]Hour, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sortHours(out)
	return out
}

// sortHours puts IntegrateSplit's rows in its order: by hour, team,
// namespace and instance type.
func sortHours(hs []Hour) {
	slices.SortFunc(hs, func(a, b Hour) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Team, b.Team), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.InstanceType, b.InstanceType))
	})
}

// sweep walks the team's allocations on one instance type between every
// start, end, hour boundary and change of the guarantee (steps); in each
// piece the guarantee in force is filled in order of start time and emit
// gets each allocation's guaranteed and borrowed quantity-seconds (qty:
// accelerators, or CPU millicores) in that piece's hour.
func sweep(as []*Alloc, qty func(*Alloc) int64, steps []GuaranteeStep, lo, hi int64, emit func(a *Alloc, hour, guaranteed, borrowed int64)) {
	slices.SortFunc(as, func(a, b *Alloc) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Key, b.Key))
	})
	points := make([]int64, 0, 2*len(as)+len(steps)+2)
	for _, a := range as {
		s, e := clip(a.Start, a.End, lo, hi)
		points = append(points, s, e)
	}
	if len(points) == 0 {
		return
	}
	first, last := slices.Min(points), slices.Max(points)
	for h := hourOf(first) + 3600; h < last; h += 3600 {
		points = append(points, h)
	}
	for _, st := range steps {
		if u := st.From.Unix(); u > first && u < last {
			points = append(points, u)
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	// as is in start order and clipping keeps that order, so the active
	// set, appended as pieces begin, stays in start order too.
	var active []*Alloc
	next := 0
	for i := 0; i+1 < len(points); i++ {
		p, q := points[i], points[i+1]
		for ; next < len(as); next++ {
			if s, _ := clip(as[next].Start, as[next].End, lo, hi); s > p {
				break
			}
			active = append(active, as[next])
		}
		active = slices.DeleteFunc(active, func(a *Alloc) bool { _, e := clip(a.Start, a.End, lo, hi); return e <= p })
		left := stepAt(steps, p)
		for _, a := range active {
			n := qty(a)
			if n <= 0 {
				continue
			}
			in := min(max(left, 0), n)
			left -= in
			emit(a, hourOf(p), in*(q-p), (n-in)*(q-p))
		}
	}
}

// IntegrateCluster computes a cluster's hourly capacity rows per instance
// type over the same hours as Integrate: capacity is what Schedulable
// nodes offered, allocated what every team's pods held, and unhealthy the
// node-seconds of nodes not Schedulable.
func IntegrateCluster(cluster string, from, until time.Time, nodes []NodeSpan, allocs []Alloc) []ClusterHour {
	t := newClusterTally(cluster, from, until)
	t.nodes(nodes)
	t.allocs(allocs)
	return t.hours()
}

// clusterTally adds up IntegrateCluster's rows: its nodes and its pods may
// come in parts, each row being a sum over them.
type clusterTally struct {
	cluster string
	lo, hi  int64
	rows    map[clusterKey]*ClusterHour
}

type clusterKey struct {
	itype string
	hour  int64
}

func newClusterTally(cluster string, from, until time.Time) *clusterTally {
	return &clusterTally{cluster: cluster, lo: HourStart(from).Unix(), hi: until.Unix(), rows: map[clusterKey]*ClusterHour{}}
}

func (t *clusterTally) row(itype string, h int64) *ClusterHour {
	r := t.rows[clusterKey{itype, h}]
	if r == nil {
		r = &ClusterHour{Cluster: t.cluster, InstanceType: itype, Start: time.Unix(h, 0).UTC(), Source: SourceCluster}
		t.rows[clusterKey{itype, h}] = r
	}
	return r
}

func (t *clusterTally) nodes(ns []NodeSpan) {
	for _, n := range ns {
		s, e := clip(n.From, n.To, t.lo, t.hi)
		forHours(s, e, func(h, secs int64) {
			r := t.row(n.InstanceType, h)
			if n.Schedulable {
				r.CapacityAccelSeconds += n.Accelerators * secs
			} else {
				r.UnhealthyNodeSeconds += secs
			}
		})
	}
}

func (t *clusterTally) allocs(as []Alloc) {
	for _, a := range as {
		s, e := clip(a.Start, a.End, t.lo, t.hi)
		forHours(s, e, func(h, secs int64) { t.row(a.InstanceType, h).AllocatedAccelSeconds += a.Accelerators * secs })
	}
}

func (t *clusterTally) hours() []ClusterHour {
	if t.hi <= t.lo {
		return nil
	}
	out := make([]ClusterHour, 0, len(t.rows))
	for _, r := range t.rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b ClusterHour) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.InstanceType, b.InstanceType))
	})
	return out
}

// Integrator computes the rows of IntegrateSplit and IntegrateCluster from
// a cluster's records given team by team, so that its caller holds one
// team's records at a time (the collector's flush reads them so:
// store.EachTeamUsageAsOf; the whole cluster's, 50,000 pods in make bench,
// doubled the flush's peak RSS through the GC's target). The rows are the
// same as from all the records at once (TestIntegratorTeamByTeam):
//
//   - every row of IntegrateSplit, every task it counts, every wait it
//     takes a percentile of and every guarantee sweep is keyed by the
//     record's own team, and a team's guarantees are its own, so a team's
//     rows depend on its records only;
//   - a capacity row is a sum over nodes and over pods.
//
// Each team's records must come in one call to Team.
type Integrator struct {
	from, until time.Time
	g, cpu      GuaranteeHistory
	hours       []Hour
	cluster     *clusterTally
	teams       map[string]bool
}

// NewIntegrator starts the rows of the hours from the hour of from to
// until (as IntegrateSplit), with the cluster's node spans (none for a
// cluster without capacity rows) and the guarantees (IntegrateSplit's g
// and cpu).
func NewIntegrator(cluster string, from, until time.Time, nodes []NodeSpan, g, cpu GuaranteeHistory) *Integrator {
	in := &Integrator{from: from, until: until, g: g, cpu: cpu, cluster: newClusterTally(cluster, from, until), teams: map[string]bool{}}
	in.cluster.nodes(nodes)
	return in
}

// Team adds one team's records: all of them. Records of a team that an
// earlier call had are an error (its rows would be computed from part of
// its records).
func (in *Integrator) Team(team string, allocs []Alloc, wls []Workload) error {
	for _, a := range allocs {
		if a.Team != team {
			return fmt.Errorf("usage: integrate team %q: a pod of team %q", team, a.Team)
		}
	}
	for _, w := range wls {
		if w.Team != team {
			return fmt.Errorf("usage: integrate team %q: a Workload of team %q", team, w.Team)
		}
	}
	if in.teams[team] {
		return fmt.Errorf("usage: integrate team %q: its records came in two parts", team)
	}
	in.teams[team] = true
	in.hours = append(in.hours, IntegrateSplit(in.from, in.until, allocs, wls, in.g, in.cpu)...)
	in.cluster.allocs(allocs)
	return nil
}

// Hours are the teams' rows, in IntegrateSplit's order.
func (in *Integrator) Hours() []Hour {
	sortHours(in.hours)
	return in.hours
}

// ClusterHours are the capacity rows (IntegrateCluster's).
func (in *Integrator) ClusterHours() []ClusterHour { return in.cluster.hours() }

// waitPercentile is Percentile for a row's wait columns: -1 for none.
func waitPercentile(waits []int64, p int) int64 {
	if v, _, ok := Percentile(waits, p); ok {
		return v
	}
	return -1
}

// clip returns [start, end) in unix seconds within [lo, hi), an open end
// running to hi; e < s when the period lies outside.
func clip(start, end time.Time, lo, hi int64) (int64, int64) {
	s, e := start.Unix(), hi
	if !end.IsZero() {
		e = min(end.Unix(), hi)
	}
	s = max(s, lo)
	if s >= hi {
		return 1, 0
	}
	return s, e
}

// empty says that a period that began at start, clipped to [s, e), has
// nothing in the window: it lies outside, or it ended exactly where the
// window begins (then it belongs to the hours before, and counting it
// would make a recompute from that hour differ from one of the whole). A
// period of zero length inside the window is not empty: a task shorter
// than a second still ran.
func empty(start time.Time, s, e int64) bool { return e < s || (e == s && start.Unix() < s) }

func hourOf(u int64) int64 { return u - ((u%3600)+3600)%3600 }

// forHours calls f with each hour touched by [s, e) and the seconds of it
// that fall in that hour.
func forHours(s, e int64, f func(hour, secs int64)) {
	for s < e {
		h := hourOf(s)
		n := min(e, h+3600)
		f(h, n-s)
		s = n
	}
}

// LastOfEach is rs with only the last record of each key, in the order of
// those last records: a record written again replaces the earlier one of
// its key, so of records written in order the last of each is what
// stays (the store's PutUsageRecords, the collector's flush).
func LastOfEach[T any, K comparable](rs []T, key func(T) K) []T {
	last := make(map[K]int, len(rs))
	for i, r := range rs {
		last[key(r)] = i
	}
	if len(last) == len(rs) {
		return rs
	}
	out := make([]T, 0, len(last))
	for i, r := range rs {
		if last[key(r)] == i {
			out = append(out, r)
		}
	}
	return out
}
