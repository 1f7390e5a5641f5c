package collect

// The portal's usage figures on the real controllers (issue 34 items 1
// and 2): the collector runs as cmd/portal runs it, pointed at the test
// bed's scheduling cluster, with a real store, while Kueue admits, borrows
// and preempts; the test then reads what the usage pages read and compares
// it with an oracle computed only from what the controllers recorded.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// recorder keeps every state of the teams' pods and Workloads that its own
// watches of the scheduling cluster deliver: the oracle's only input.
type recorder struct {
	namespaces map[string]string // namespace -> team
	mu         sync.Mutex
	pods       map[types.UID]*podRecord
	wls        map[types.UID]*wlRecord
}

type podRecord struct {
	last *corev1.Pod
	// gone is when the watch delivered the pod's deletion: the API keeps
	// no record of when an object was removed.
	gone time.Time
}

type wlRecord struct {
	last *kueue.Workload
	// seen holds every condition (type, status, reason and
	// lastTransitionTime) any version of the Workload carried.
	seen []metav1.Condition
}

// record starts the watches and returns once they have synced; they stop
// when the test ends.
func record(t *testing.T, c *hpcluster.Cluster, teams ...hpcluster.Team) *recorder {
	t.Helper()
	r := &recorder{namespaces: map[string]string{}, pods: map[types.UID]*podRecord{}, wls: map[types.UID]*wlRecord{}}
	for _, team := range teams {
		r.namespaces[team.Namespace] = team.Name
	}
	ctx, cancel := context.WithCancel(context.Background())
	kf := informers.NewSharedInformerFactory(c.Kube, 0)
	qf := kueueinformers.NewSharedInformerFactory(c.Kueue, 0)
	t.Cleanup(func() { cancel(); kf.Shutdown(); qf.Shutdown() })
	podReg, err := kf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.pod(obj, false) },
		UpdateFunc: func(_, obj any) { r.pod(obj, false) },
		DeleteFunc: func(obj any) { r.pod(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	wlReg, err := qf.Kueue().V1beta2().Workloads().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.workload,
		UpdateFunc: func(_, obj any) { r.workload(obj) },
	})
	if err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	qf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podReg.HasSynced, wlReg.HasSynced) {
		t.Fatal("the oracle's watches did not sync")
	}
	return r
}

func (r *recorder) pod(obj any, gone bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || r.namespaces[p.Namespace] == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[p.UID]
	if rec == nil {
		rec = &podRecord{}
		r.pods[p.UID] = rec
	}
	rec.last = p.DeepCopy()
	if gone {
		rec.gone = time.Now()
	}
}

func (r *recorder) workload(obj any) {
	w, ok := obj.(*kueue.Workload)
	if !ok || r.namespaces[w.Namespace] == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.wls[w.UID]
	if rec == nil {
		rec = &wlRecord{}
		r.wls[w.UID] = rec
	}
	rec.last = w.DeepCopy()
	for _, c := range w.Status.Conditions {
		c.Message, c.ObservedGeneration = "", 0
		if !slices.Contains(rec.seen, c) {
			rec.seen = append(rec.seen, c)
		}
	}
}

// teamHour is one team's figures in one clock hour, as the usage pages
// show them: guaranteed and borrowed accelerator-seconds, preempted tasks,
// the wait (p50, p90, p99, seconds; -1 for none) of the admissions in the
// hour; tolerance is, for the oracle, how far its accelerator-seconds may
// lie from the collector's (see oracle).
type teamHour struct {
	guaranteed, borrowed int64
	preempted            int
	p50, p90, p99        int64
	tolerance            int64
}

type teamHourKey struct {
	team string
	hour time.Time
}

// oracle computes each team's hours from what the recorder saw:
//   - accelerator-seconds from each pod's status.startTime (set by its
//     "kubelet", kwok) to its end: the latest finishedAt of its terminated
//     containers, or, for a pod deleted before it finished (a preempted
//     workload's), when it was removed from the API; times in whole seconds,
//     as the API serializes them. The pod's accelerators are its requests,
//     on the node kube-scheduler bound it to, which must be of the
//     instance type (checked against the node's labels and allocatable);
//   - split at each instant by the team's guarantee, which is its
//     ClusterQueue's nominal quota as Kueue holds it: guaranteed is
//     min(held, quota), borrowed the rest (per team, which is what the
//     portal's earliest-first rule adds up to whatever the order);
//   - preemptions from each Workload's Preempted condition (its
//     lastTransitionTime), once per Workload and hour;
//   - waits from the Admitted condition's lastTransitionTime, each
//     admission measured from the Workload's creation or, after an
//     eviction, from the Evicted condition's lastTransitionTime; the
//     percentiles by nearest rank.
//
// The removal of a pod is the one instant the API records nowhere; the
// oracle and the collector each learn it from their own watch, which may
// deliver it on either side of a second boundary, so each such pod widens
// the tolerance of its last hour by its accelerators x 1 s.
func (r *recorder) oracle(t *testing.T, c *hpcluster.Cluster, quota map[string]int64, it hpcluster.InstanceType) map[teamHourKey]*teamHour {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[teamHourKey]*teamHour{}
	row := func(team string, at time.Time) *teamHour {
		k := teamHourKey{team, usage.HourStart(at)}
		if out[k] == nil {
			out[k] = &teamHour{p50: -1, p90: -1, p99: -1}
		}
		return out[k]
	}
	type step struct {
		at    int64
		delta int64
	}
	steps := map[string][]step{}
	for _, rec := range r.pods {
		p := rec.last
		if p.Status.StartTime == nil || p.Spec.NodeName == "" {
			continue
		}
		team := r.namespaces[p.Namespace]
		var gpus int64
		for _, ctr := range p.Spec.Containers {
			if q, ok := ctr.Resources.Requests[hpcluster.ResourceGPU]; ok {
				gpus += q.Value()
			}
		}
		node, err := c.Kube.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s's node %s: %v", p.Name, p.Spec.NodeName, err)
		}
		alloc := node.Status.Allocatable[hpcluster.ResourceGPU]
		if node.Labels[hpcluster.LabelInstanceType] != it.Name || gpus > alloc.Value() {
			t.Fatalf("pod %s (%d GPUs) bound to node %s of %s offering %s", p.Name, gpus, node.Name, node.Labels[hpcluster.LabelInstanceType], alloc.String())
		}
		start := p.Status.StartTime.UTC().Truncate(time.Second)
		var end time.Time
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.After(end) {
				end = term.FinishedAt.UTC().Truncate(time.Second)
			}
		}
		if end.IsZero() {
			if rec.gone.IsZero() {
				t.Fatalf("pod %s/%s neither finished nor went: the scenario must end with every pod done", p.Namespace, p.Name)
			}
			end = rec.gone.UTC().Truncate(time.Second)
			row(team, end).tolerance += gpus
		}
		steps[team] = append(steps[team], step{start.Unix(), gpus}, step{end.Unix(), -gpus})
	}
	for team, ss := range steps {
		slices.SortFunc(ss, func(a, b step) int { return cmp.Compare(a.at, b.at) })
		var held int64
		for i, s := range ss {
			held += s.delta
			if i+1 == len(ss) {
				break
			}
			// [s.at, next) at held accelerators, cut at hour boundaries.
			for from, to := s.at, ss[i+1].at; from < to; {
				h := usage.HourStart(time.Unix(from, 0))
				until := min(to, h.Add(time.Hour).Unix())
				g := min(held, quota[team])
				rw := row(team, h)
				rw.guaranteed += g * (until - from)
				rw.borrowed += (held - g) * (until - from)
				from = until
			}
		}
	}
	waits := map[teamHourKey][]int64{}
	for _, rec := range r.wls {
		team := r.namespaces[rec.last.Namespace]
		var admitted, evicted []time.Time
		preempted := map[time.Time]bool{}
		for _, cd := range rec.seen {
			if cd.Status != metav1.ConditionTrue {
				continue
			}
			at := cd.LastTransitionTime.UTC()
			switch cd.Type {
			case kueue.WorkloadAdmitted:
				admitted = append(admitted, at)
			case kueue.WorkloadEvicted:
				evicted = append(evicted, at)
			case kueue.WorkloadPreempted:
				preempted[usage.HourStart(at)] = true
			}
		}
		for h := range preempted {
			row(team, h).preempted++
		}
		slices.SortFunc(admitted, time.Time.Compare)
		slices.SortFunc(evicted, time.Time.Compare)
		admitted, evicted = slices.Compact(admitted), slices.Compact(evicted)
		from := rec.last.CreationTimestamp.UTC()
		for _, at := range admitted {
			for _, ev := range evicted {
				if ev.After(from) && !ev.After(at) {
					from = ev
				}
			}
			row(team, at)
			k := teamHourKey{team, usage.HourStart(at)}
			waits[k] = append(waits[k], int64(at.Sub(from)/time.Second))
			from = at
		}
	}
	rank := func(ws []int64, p int) int64 { return ws[(p*len(ws)+99)/100-1] } // nearest rank: the ceil(p*n/100)-th
	for k, ws := range waits {
		slices.Sort(ws)
		out[k].p50, out[k].p90, out[k].p99 = rank(ws, 50), rank(ws, 90), rank(ws, 99)
	}
	return out
}

// logStarts logs, for each admission of each Workload, when the pod of
// its job that ran next started: the part of a task's wait that the
// portal's wait (creation, or eviction, to admission, as Kueue records
// it) does not include.
func (r *recorder) logStarts(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.wls {
		var job types.UID
		for _, o := range rec.last.OwnerReferences {
			job = o.UID
		}
		var starts []time.Time
		for _, pr := range r.pods {
			for _, o := range pr.last.OwnerReferences {
				if o.UID == job && pr.last.Status.StartTime != nil {
					starts = append(starts, pr.last.Status.StartTime.UTC())
				}
			}
		}
		slices.SortFunc(starts, time.Time.Compare)
		for _, cd := range rec.seen {
			if cd.Type != kueue.WorkloadAdmitted || cd.Status != metav1.ConditionTrue {
				continue
			}
			at := cd.LastTransitionTime.UTC()
			if i := slices.IndexFunc(starts, func(s time.Time) bool { return !s.Before(at) }); i >= 0 {
				t.Logf("  %s/%s admitted %s, its pod started %s later", rec.last.Namespace, rec.last.Name, at.Format("15:04:05"), starts[i].Sub(at))
			}
		}
	}
}

// portalHours is what the usage pages read for each team (the store's
// UsageHours, as internal/web's teamHours calls it), per team and hour:
// the rows of every namespace and instance type added up; the wait
// percentiles of the one row with admissions.
func portalHours(t *testing.T, db *store.DB, from, to time.Time, teams ...string) map[teamHourKey]*teamHour {
	t.Helper()
	out := map[teamHourKey]*teamHour{}
	for _, team := range teams {
		rows, err := db.UsageHours(t.Context(), store.UsageFilter{Team: team, From: from, To: to})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range rows {
			k := teamHourKey{team, h.Start}
			r := out[k]
			if r == nil {
				r = &teamHour{p50: -1, p90: -1, p99: -1}
				out[k] = r
			}
			r.guaranteed += h.GuaranteedAccelSeconds
			r.borrowed += h.BorrowedAccelSeconds
			r.preempted += h.Preempted
			if h.WaitP50Seconds >= 0 {
				if r.p50 >= 0 {
					t.Fatalf("team %s has admissions in two rows of hour %s: their percentiles cannot be compared", team, h.Start)
				}
				r.p50, r.p90, r.p99 = h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds
			}
		}
	}
	return out
}

// portalRun is the usage collector as cmd/portal's newUsageCollector makes
// it (the default cluster settings' accelerators and ClusterQueue names,
// the guarantees from the store's history), on the scheduling cluster, with
// a real SQLite store, flushing every second; the teams' namespaces carry
// the team label the portal's plan applies (provision.LabelTeam, which
// marks the namespaces the collector counts), and each team is guaranteed
// one instance of it, recorded as the store's apply records an approved
// guarantee.
type portalRun struct {
	db      *store.DB
	col     *Collector
	cluster string
	started time.Time
	stop    func()
}

func startPortal(t *testing.T, c *hpcluster.Cluster, it hpcluster.InstanceType, teams ...hpcluster.Team) *portalRun {
	t.Helper()
	ctx := t.Context()
	for _, team := range teams {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, team.Namespace, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ns.Labels[provision.LabelTeam] = team.Name
			_, err = c.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("label namespace %s: %v", team.Namespace, err)
		}
	}
	db := migratedDB(t)
	var values []string
	for _, team := range teams {
		values = append(values, fmt.Sprintf("('%s', '%s', '0001-01-01T00:00:00.000000000Z', 1)", team.Name, it.Name))
	}
	if err := db.ExecForTest(ctx, `INSERT INTO team_guarantee_history (team, instance_type, from_at, count) VALUES `+strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}
	settings := provision.ClusterSettings{}.WithDefaults()
	if n := settings.Accelerators[it.Name]; n.AcceleratorResource != string(hpcluster.ResourceGPU) || int64(n.Accelerators) != it.Allocatable.Name(hpcluster.ResourceGPU, "").Value() {
		t.Fatalf("the settings count %s in %d %s; the fixture's nodes offer %s", it.Name, n.Accelerators, n.AcceleratorResource, it.Allocatable.Name(hpcluster.ResourceGPU, ""))
	}
	p := &portalRun{db: db, cluster: fmt.Sprintf("sched-%d", time.Now().UnixNano()%1e6), started: time.Now().UTC()}
	p.col = &Collector{Kube: c.Kube, Kueue: c.Kueue, Store: db, Cluster: p.cluster, Owner: "the elected leader",
		Guarantees:     GuaranteesFrom(db, func(itype string) int64 { return int64(settings.Accelerators[itype].Accelerators) }, nil),
		Accelerators:   settings.Accelerators,
		ClusterQueueOf: settings.ClusterQueueName,
		Interval:       time.Second}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.col.Run(runCtx) }()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("collector Run = %v", err)
			}
		})
	}
	t.Cleanup(p.stop)
	hpcluster.WaitFor(t, "the collector synced", func() (bool, error) {
		p.col.mu.Lock()
		defer p.col.mu.Unlock()
		return p.col.synced, nil
	})
	return p
}

// nominal is each team's nominal quota of GPUs on the flavor, as Kueue's
// ClusterQueue holds it.
func nominal(t *testing.T, c *hpcluster.Cluster, it hpcluster.InstanceType, teams ...hpcluster.Team) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, team := range teams {
		cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(t.Context(), team.ClusterQueue, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				for _, r := range f.Resources {
					if string(f.Name) == it.Name && r.Name == hpcluster.ResourceGPU {
						out[team.Name] += r.NominalQuota.Value()
					}
				}
			}
		}
	}
	return out
}

// Scenario 1 through the portal: red (guarantee 8 GPUs) runs 16 while blue
// is idle, blue submits its 8 and Kueue preempts one of red's; when every
// job is done, the portal's hourly figures per team (guaranteed and
// borrowed GPU-seconds, preemptions, waits) equal the oracle's, and
// Kueue's account of red's borrowing, recorded beside the collector's,
// agrees with it (differing only while a preempted pod terminates, for
// less than the tolerance).
func TestSchedUsageMatchesOracle(t *testing.T) {
	s := newSchedScenario(t)
	rec := record(t, s.c, s.red, s.blue)
	p := startPortal(t, s.c, hpcluster.P5, s.red, s.blue)
	ctx := t.Context()

	job := func(name string, run time.Duration) hpcluster.JobSpec {
		return hpcluster.JobSpec{Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 8, PriorityClass: s.training, RunFor: run}
	}
	redA := s.c.SubmitJob(t, s.red, job("red-a", 20*time.Second))
	s.waitWorkload(t, redA, "admitted", admitted)
	redB := s.c.SubmitJob(t, s.red, job("red-b", 20*time.Second))
	s.waitWorkload(t, redB, "admitted", admitted)
	s.waitRunning(t, redA, 1)
	s.waitRunning(t, redB, 1)
	s.waitQueueUsage(t, s.red, 16, 8)
	// Let the collector see red borrowing before blue claims its quota.
	time.Sleep(2 * time.Second)
	s.c.SubmitJob(t, s.blue, job("blue-a", 15*time.Second))

	// Every job runs to its end: the preempted one is readmitted once red's
	// other one has finished and frees red's guarantee.
	for _, j := range []struct {
		job  string
		team hpcluster.Team
	}{{"red-a", s.red}, {"red-b", s.red}, {"blue-a", s.blue}} {
		hpcluster.WaitFor(t, j.job+" finished", func() (bool, error) {
			got, err := s.c.Kube.BatchV1().Jobs(j.team.Namespace).Get(ctx, j.job, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Succeeded == 1, nil
		})
	}
	// Every pod of theirs has reached its end (finished, or gone).
	hpcluster.WaitFor(t, "every pod finished or gone", func() (bool, error) {
		for _, team := range []hpcluster.Team{s.red, s.blue} {
			list, err := s.c.Kube.CoreV1().Pods(team.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, pod := range list.Items {
				if pod.Status.Phase != corev1.PodSucceeded {
					return false, nil
				}
			}
		}
		return true, nil
	})
	// Two flushes more, then the collector stops (its last flush).
	time.Sleep(2500 * time.Millisecond)
	p.stop()

	t.Logf("admission to start (kube-scheduler and kwok; a preempted pod holds its node until it is gone):")
	rec.logStarts(t)
	quota := nominal(t, s.c, hpcluster.P5, s.red, s.blue)
	want := rec.oracle(t, s.c, quota, hpcluster.P5)
	got := portalHours(t, p.db, usage.HourStart(p.started), usage.HourStart(time.Now()).Add(time.Hour), s.red.Name, s.blue.Name)
	var keys []teamHourKey
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if want[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b teamHourKey) int { return cmp.Or(a.hour.Compare(b.hour), cmp.Compare(a.team, b.team)) })
	t.Logf("scenario 1, per team and hour (GPU-seconds; waits in seconds, p50/p90/p99); oracle from the controllers' records vs the portal's usage rows:")
	t.Logf("%-17s %-5s | %-33s | %-33s", "hour (UTC)", "team", "oracle: guar borr pre wait", "portal: guar borr pre wait")
	for _, k := range keys {
		o, g := cmp.Or(want[k], &teamHour{p50: -1, p90: -1, p99: -1}), cmp.Or(got[k], &teamHour{p50: -1, p90: -1, p99: -1})
		t.Logf("%-17s %-5s | %6d %6d %3d %4d/%d/%-4d | %6d %6d %3d %4d/%d/%-4d (tolerance %d)", k.hour.Format("2006-01-02 15:04"), k.team,
			o.guaranteed, o.borrowed, o.preempted, o.p50, o.p90, o.p99, g.guaranteed, g.borrowed, g.preempted, g.p50, g.p90, g.p99, o.tolerance)
		if d := g.guaranteed - o.guaranteed; d > o.tolerance || -d > o.tolerance {
			t.Errorf("%s %s: portal %d guaranteed GPU-seconds, oracle %d (tolerance %d)", k.hour, k.team, g.guaranteed, o.guaranteed, o.tolerance)
		}
		if d := g.borrowed - o.borrowed; d > o.tolerance || -d > o.tolerance {
			t.Errorf("%s %s: portal %d borrowed GPU-seconds, oracle %d (tolerance %d)", k.hour, k.team, g.borrowed, o.borrowed, o.tolerance)
		}
		if g.preempted != o.preempted || g.p50 != o.p50 || g.p90 != o.p90 || g.p99 != o.p99 {
			t.Errorf("%s %s: portal preempted %d, waits %d/%d/%d; oracle %d, %d/%d/%d", k.hour, k.team,
				g.preempted, g.p50, g.p90, g.p99, o.preempted, o.p50, o.p90, o.p99)
		}
	}
	// What the scenario must have shown, in the oracle itself: red
	// borrowed, one of red's was preempted, blue waited.
	var borrowed int64
	var preempted int
	for k, o := range want {
		if k.team == s.red.Name {
			borrowed += o.borrowed
			preempted += o.preempted
		}
	}
	if borrowed == 0 || preempted != 1 {
		t.Errorf("the oracle shows red borrowing %d GPU-seconds with %d preemption(s); the scenario needs borrowing and one preemption", borrowed, preempted)
	}

	// Kueue's account and the portal's: both saw red borrow 8 GPUs, and
	// they differed only for less than the tolerance the test sets above
	// the 30 s a preempted pod may take to terminate.
	samples, err := p.db.KueueBorrowing(ctx, p.cluster, p.started.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	logBorrowing(t, samples)
	var both bool
	for _, b := range samples {
		both = both || (b.ClusterQueue == s.red.ClusterQueue && b.Kueue == 8 && b.Portal == 8)
	}
	if !both {
		t.Errorf("no sample of %s with Kueue and the portal both counting 8 GPUs borrowed", s.red.ClusterQueue)
	}
	th := usage.DefaultThresholds
	th.KueueAccountWindow = 45 * time.Second
	if longest := longestDisagreement(samples, time.Now()); longest >= th.KueueAccountWindow {
		t.Errorf("Kueue's and the portal's borrowing differed for %s in scenario 1", longest)
	}
	fired := evaluateSignals(t, p.db, th)
	for _, e := range fired {
		if e.Signal == usage.SignalKueueAccount {
			t.Errorf("scenario 1 fired %s: %s", e.Signal, e.Detail)
		}
	}
}

// longestDisagreement is the longest stretch in which a series' two
// figures differed, up to now.
func longestDisagreement(samples []usage.BorrowSample, now time.Time) time.Duration {
	var longest time.Duration
	since := map[string]time.Time{}
	for _, b := range samples { // in order of series and time
		k := b.Key()
		if !b.Agree() {
			if since[k].IsZero() {
				since[k] = b.At
			}
			continue
		}
		if !since[k].IsZero() {
			longest = max(longest, b.At.Sub(since[k]))
			delete(since, k)
		}
	}
	for _, s := range since {
		longest = max(longest, now.Sub(s))
	}
	return longest
}

func logBorrowing(t *testing.T, samples []usage.BorrowSample) {
	t.Helper()
	t.Logf("Kueue's borrowed (ClusterQueue status.flavorsUsage) vs the portal's, as recorded:")
	for _, b := range samples {
		t.Logf("  %s %-31s %s %s: Kueue %d, portal %d", b.At.Format("15:04:05"), b.ClusterQueue, b.Flavor, b.Resource, b.Kueue, b.Portal)
	}
}

// evaluateSignals runs the signals' evaluation as the portal's loop does
// (usage.Signals.Evaluate over the store) and returns the open events.
func evaluateSignals(t *testing.T, db *store.DB, th usage.Thresholds) []store.SignalEvent {
	t.Helper()
	sig := usage.Signals{Store: db, Accelerators: map[string]int{hpcluster.P5.Name: 8}, Thresholds: th, ClusterOwner: "platform admins"}
	if _, err := sig.Evaluate(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	events, err := db.SignalEvents(t.Context(), store.SignalFilter{OpenOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// A deliberate disagreement, as it happens: red runs its guaranteed 8 GPUs
// through its queue, and a member starts a bare pod asking for 8 more
// without a queue name. Kueue does not manage it (so its ClusterQueue
// reports nothing borrowed), kube-scheduler places it on the other p5
// node, and the portal counts red holding 16, 8 above its guarantee: the
// admins' signal names the queue, flavor, resource and both figures once
// the difference has lasted longer than the tolerance.
func TestSchedKueueAccountDisagreement(t *testing.T) {
	s := newSchedScenario(t)
	p := startPortal(t, s.c, hpcluster.P5, s.red, s.blue)
	ctx := t.Context()
	redA := s.c.SubmitJob(t, s.red, hpcluster.JobSpec{Name: "red-a", Pods: 1, Resource: hpcluster.ResourceGPU, Count: 8,
		PriorityClass: s.training, RunFor: time.Hour})
	s.waitWorkload(t, redA, "admitted", admitted)
	s.waitRunning(t, redA, 1)
	s.c.RunUnqueuedPod(t, s.red, "notebook", hpcluster.P5, hpcluster.ResourceGPU, 8)
	// Kueue's own account: red uses its 8, borrows nothing.
	s.waitQueueUsage(t, s.red, 8, 0)

	th := usage.DefaultThresholds
	th.KueueAccountWindow = 5 * time.Second
	var since time.Time
	hpcluster.WaitFor(t, "the disagreement recorded", func() (bool, error) {
		samples, err := p.db.KueueBorrowing(ctx, p.cluster, p.started)
		for _, b := range samples {
			if b.ClusterQueue == s.red.ClusterQueue && b.Kueue == 0 && b.Portal == 8 {
				since = b.At
			}
		}
		return !since.IsZero(), err
	})
	// Within the tolerance, nothing fires.
	for _, e := range evaluateSignals(t, p.db, th) {
		if e.Signal == usage.SignalKueueAccount && time.Since(since) <= th.KueueAccountWindow {
			t.Fatalf("fired within the tolerance: %s", e.Detail)
		}
	}
	time.Sleep(time.Until(since.Add(th.KueueAccountWindow + 1500*time.Millisecond)))
	var found *store.SignalEvent
	events := evaluateSignals(t, p.db, th)
	for i, e := range events {
		if e.Signal == usage.SignalKueueAccount {
			found = &events[i]
		}
	}
	if found == nil {
		t.Fatalf("no %s signal for the admins; open events: %+v", usage.SignalKueueAccount, events)
	}
	t.Logf("the admins' signal: %s", found.Detail)
	if found.Team != "" {
		t.Errorf("the signal is team %q's; the cluster's (the admins') is wanted", found.Team)
	}
	for _, part := range []string{"ClusterQueue " + s.red.ClusterQueue, "team red", "flavor " + hpcluster.P5.Name, string(hpcluster.ResourceGPU),
		"Kueue 0 borrowed, the portal 8"} {
		if !strings.Contains(found.Detail, part) {
			t.Errorf("the signal's detail %q does not say %q", found.Detail, part)
		}
	}
	p.stop()
	samples, err := p.db.KueueBorrowing(ctx, p.cluster, p.started.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	logBorrowing(t, samples)
}
