package collect

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// A pod whose finish reaches the collector late (its status says it ended
// before the last flush) has the hours since its end recomputed: the hour
// already written is replaced with the shorter figure, not left as it was.
func TestLateFinishRecomputesWrittenHours(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	clk := &clock{t: t0}
	c := benchCollector(t0)
	c.Now, c.Store, c.Owner = clk.now, db, "one"
	c.Guarantees = accelOnly(func(context.Context) (usage.GuaranteeHistory, error) {
		return usage.Guarantees{"team01": {"ml.p5.48xlarge": 8}}.History(), nil
	})
	if _, err := db.ClaimCollector(ctx, "bench", "one", t0, t0); err != nil {
		t.Fatal(err)
	}
	pod := fatPod(1, t0) // team01, 1 GPU, 4 CPUs, 16 GiB, running from 10:00
	obj, _ := strip(pod)
	c.onPod(obj)
	clk.set(t0.Add(30 * time.Minute))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(65 * time.Minute)) // 11:05: counted as running so far
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// At 11:10 the status arrives: it finished at 10:20.
	clk.set(t0.Add(70 * time.Minute))
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: t0.Add(20 * time.Minute)}}}
	obj, _ = strip(pod)
	c.onPod(obj)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageHours(ctx, store.UsageFilter{From: t0, To: t0.Add(2 * time.Hour)})
	// 10h: 1 GPU x 1200 s, guaranteed; 4000m x 1200 s; 16384 MiB x 1200 s;
	// and no 11h row any more.
	if err != nil || len(got) != 1 || got[0].GuaranteedAccelSeconds != 1200 || got[0].CPUMilliSeconds != 4000*1200 || got[0].MemoryMiBSeconds != 16384*1200 {
		t.Errorf("hours = %+v, %v", got, err)
	}
}

// An Evicted condition still True beside Admitted True (readmitted) is the
// old eviction: the preemption is counted once.
func TestStaleEvictionCountedOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	c := benchCollector(t0)
	w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "hyperpod-ns-team01", UID: "w-uid", CreationTimestamp: metav1.Time{Time: t0}}}
	cond := func(typ string, st metav1.ConditionStatus, reason string, min int) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, LastTransitionTime: metav1.Time{Time: t0.Add(time.Duration(min) * time.Minute)}}
	}
	for _, conds := range [][]metav1.Condition{
		{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", 5)},
		{cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", 40), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, 40)},
		{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", 70), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, 40)},
		{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", 70), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, 40)},
	} {
		w = w.DeepCopy()
		w.Status.Conditions = conds
		c.onWorkload(w)
	}
	x := c.wls["w-uid"].w
	want := []usage.Admission{{At: t0.Add(5 * time.Minute), WaitSeconds: 300}, {At: t0.Add(70 * time.Minute), WaitSeconds: 1800}}
	if len(x.Preemptions) != 1 || !reflect.DeepEqual(x.Admissions, want) {
		t.Errorf("history = %+v", x)
	}
}

// Issue 38: a pod reported late for a past hour changes only the rows it
// touches, and the hours recomputed with it keep the guarantee that was in
// force then. team01 holds 2 GPUs from 15:00; its guarantee, 1 GPU, is
// amended to 3 at 16:30 (the history as the store would have it at each
// flush). At 18:05 a pod of team02 that ran 15:05-15:10 arrives.
func TestLatePodKeepsPastGuarantees(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 15, 0, 0, 0, time.UTC)
	amended := t0.Add(90 * time.Minute)
	clk := &clock{t: t0}
	c := benchCollector(t0)
	c.Now, c.Store, c.Owner = clk.now, db, "one"
	c.Guarantees = accelOnly(func(context.Context) (usage.GuaranteeHistory, error) {
		g := usage.GuaranteeHistory{}
		g.Add("team01", "ml.p5.48xlarge", time.Time{}, 1)
		if !clk.now().Before(amended) {
			g.Add("team01", "ml.p5.48xlarge", amended, 3)
		}
		return g, nil
	})
	if _, err := db.ClaimCollector(ctx, "bench", "one", t0, t0); err != nil {
		t.Fatal(err)
	}
	held := fatPod(1, t0) // team01, node-1
	held.Spec.Containers[0].Resources.Requests[ResourceGPU] = resource.MustParse("2")
	obj, _ := strip(held)
	c.onPod(obj)
	for _, m := range []int{30, 70, 120, 180} {
		clk.set(t0.Add(time.Duration(m) * time.Minute))
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() []usage.Hour {
		got, err := db.UsageHours(ctx, store.UsageFilter{From: t0, To: t0.Add(3 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// By hand: 15h, 1 of the 2 GPUs within the guarantee (3600 s each
	// way); 16h, 1 until 16:30 (1800 + 1800 borrowed) then both (3600);
	// 17h, both.
	row := func(team string, start time.Time, g, b int64) usage.Hour {
		return usage.Hour{Team: team, Namespace: "hyperpod-ns-" + team, InstanceType: "ml.p5.48xlarge", Start: start,
			GuaranteedAccelSeconds: g, BorrowedAccelSeconds: b, CPUMilliSeconds: 4000 * 3600, MemoryMiBSeconds: 16384 * 3600, Running: 1,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster}
	}
	want := []usage.Hour{row("team01", t0, 3600, 3600), row("team01", t0.Add(time.Hour), 1800+3600, 1800), row("team01", t0.Add(2*time.Hour), 7200, 0)}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("before the late pod:\n%+v\nwant\n%+v", got, want)
	}

	clk.set(t0.Add(185 * time.Minute))
	late := fatPod(2, t0.Add(5*time.Minute)) // team02, no guarantee
	late.Status.Phase = corev1.PodSucceeded
	late.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: t0.Add(10 * time.Minute)}}}
	obj, _ = strip(late)
	c.onPod(obj)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Only team02's 15h row is new: 1 GPU x 300 s, borrowed; CPU and
	// memory for 300 s. team01's rows are as they were.
	extra := row("team02", t0, 0, 300)
	extra.CPUMilliSeconds, extra.MemoryMiBSeconds = 4000*300, 16384*300
	want = []usage.Hour{want[0], extra, want[1], want[2]}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the late pod:\n%+v\nwant\n%+v", got, want)
	}
}

// Issue 38 item 1, without a cluster: a collector that starts on a store
// where a finished Workload's history (admitted, preempted, readmitted) is
// recorded takes that history, not a rebuild from the final conditions the
// informer delivers, and marks nothing before its last heartbeat to be
// recomputed. (TestRestartKeepsRecordedHistoryIntegration runs the same
// through the test bed's API server, with a hand-over.)
func TestStartMergesRecordedWorkloads(t *testing.T) {
	ctx := context.Background()
	db := migratedDB(t)
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	cond := func(typ string, st metav1.ConditionStatus, reason string, m int) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, LastTransitionTime: metav1.Time{Time: min(m)}}
	}
	w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "hyperpod-ns-team01", UID: "w-uid", CreationTimestamp: metav1.Time{Time: t0}}}
	final := []metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", 54), cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", 58)}
	clk := &clock{t: t0}
	c := benchCollector(t0)
	c.Now, c.Store, c.Owner = clk.now, db, "one"
	c.Guarantees = accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })
	if _, err := db.ClaimCollector(ctx, "bench", "one", t0, t0); err != nil {
		t.Fatal(err)
	}
	for _, conds := range [][]metav1.Condition{
		{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", 5)},
		{cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", 40), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, 40)},
		final,
	} {
		w = w.DeepCopy()
		w.Status.Conditions = conds
		c.onWorkload(w)
	}
	clk.set(min(60))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hours := func() []usage.Hour {
		got, err := db.UsageHours(ctx, store.UsageFilter{From: t0, To: min(120)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := hours()
	// One preemption, waits 300 s and 840 s: p50 300, p90 and p99 840.
	if len(before) != 1 || before[0].Preempted != 1 || before[0].WaitP50Seconds != 300 || before[0].WaitP90Seconds != 840 {
		t.Fatalf("first run: %+v", before)
	}

	// The restart: the informer delivers the Workload as it is now.
	clk.set(min(70))
	c = benchCollector(min(60))
	c.Now, c.Store, c.Owner = clk.now, db, "one"
	c.Guarantees = accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil })
	c.loading, c.deferredPods, c.deferredWLs = true, map[types.UID]*slimPod{}, map[string]*kueue.Workload{}
	c.onWorkload(w)
	if err := c.merge(ctx, min(70)); err != nil {
		t.Fatal(err)
	}
	if x := c.wls["w-uid"].w; len(x.Preemptions) != 1 || len(x.Admissions) != 2 || c.dirtyFrom.Before(min(60)) {
		t.Errorf("after the restart: history %+v, recompute from %s", x, c.dirtyFrom)
	}
	if _, err := db.ClaimCollector(ctx, "bench", "one", min(70), min(69)); err != nil {
		t.Fatal(err)
	}
	clk.set(min(75))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hours(); !reflect.DeepEqual(got, before) {
		t.Errorf("the restart changed the hour:\n%+v\nwas\n%+v", got, before)
	}
}

// accelOnly is Guarantees from a function of accelerators alone (CPU
// unsplit).
func accelOnly(f func(ctx context.Context) (usage.GuaranteeHistory, error)) func(ctx context.Context) (Guaranteed, error) {
	return func(ctx context.Context) (Guaranteed, error) {
		h, err := f(ctx)
		return Guaranteed{Accelerators: h}, err
	}
}

// TestDirtyWorkloadRecordsOwnTheirSpans: a Workload record queued for the
// next flush is a snapshot. The flush encodes the queued records after
// releasing the collector's lock, so a later event of the same Workload
// (here its admission, which closes the pending span in place) must not
// change a record already queued (ci28's data race: flushUsage's
// encoding against workloadLocked's write of Pending[n-1].To).
func TestDirtyWorkloadRecordsOwnTheirSpans(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	c := benchCollector(t0)
	w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "hyperpod-ns-team01", UID: "w-uid", CreationTimestamp: metav1.Time{Time: t0}}}
	w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: metav1.Time{Time: t0}}}
	c.onWorkload(w)
	n := len(c.dirty.Workloads)
	if n == 0 || len(c.dirty.Workloads[n-1].Pending) == 0 {
		t.Fatalf("no pending Workload record queued: %+v", c.dirty.Workloads)
	}
	queued := c.dirty.Workloads[n-1]
	w = w.DeepCopy()
	w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.Time{Time: t0.Add(5 * time.Minute)}}}
	c.onWorkload(w)
	if got := c.wls["w-uid"].w.Pending; len(got) == 0 || got[len(got)-1].To.IsZero() {
		t.Fatalf("the admission did not close the pending span: %+v", got)
	}
	if to := queued.Pending[len(queued.Pending)-1].To; !to.IsZero() {
		t.Errorf("the record queued before the admission changed after it: its pending span now ends at %s", to)
	}
}
