package collect

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// Issue 38 item 1: a restart of the collector, then a hand-over to another
// replica, leave a finished Workload's recorded history (two admissions, a
// preemption) and the hours computed from it as they were, and recompute
// nothing before the last heartbeat. Also the pod of that Workload, whose
// node was deleted while the collector was down, keeps its instance type.
// Every figure is computed by hand from the times the test set.
func TestRestartKeepsRecordedHistoryIntegration(t *testing.T) {
	kube, kq := testbedClients(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	db := migratedDB(t)
	sfx := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	p5, ns, nodeName := "ml.r"+sfx+".48xlarge", "restart-red-"+sfx, "restart-n-"+sfx
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{provision.LabelTeam: "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	createNode(ctx, t, kube, nodeName, p5, "8")
	owner, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-w"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownerRef := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr(true)}}
	wl, err := kq.KueueV1beta2().Workloads(ns).Create(ctx, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-w", Namespace: ns, OwnerReferences: ownerRef},
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelInstanceTypeStable: p5}, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "train"}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	C := wl.CreationTimestamp.UTC().Truncate(time.Second)
	B := usage.HourStart(C).Add(time.Hour)
	m := func(min int) time.Time { return B.Add(time.Duration(min) * time.Minute) }
	clk := &clock{t: B}
	cluster := "restart-" + sfx
	newCollector := func(name string) *Collector {
		return &Collector{Kube: kube, Kueue: kq, Store: db, Cluster: cluster, Owner: name, Now: clk.now,
			Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) {
				return usage.Guarantees{"red": {p5: 8}}.History(), nil
			})}
	}
	c := newCollector("one")
	if _, err := db.ClaimCollector(ctx, cluster, "one", B, B.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	stop, err := c.Start(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}

	// The job's pod holds 8 GPUs from B+5m until it is preempted at B+40m.
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: ns, OwnerReferences: ownerRef},
		Spec: corev1.PodSpec{NodeName: nodeName, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "train",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: resource.MustParse("8")}, Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("8")}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.StartTime = corev1.PodFailed, &metav1.Time{Time: m(5)}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "train", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Preempted", StartedAt: metav1.Time{Time: m(5)}, FinishedAt: metav1.Time{Time: m(40)}}}}}
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "the pod", func() bool { p := c.pods[pod.UID]; return p != nil && !p.End.IsZero() })

	// The Workload: admitted B+5m, preempted B+40m, readmitted B+54m,
	// finished B+58m; each state as Kueue leaves its conditions.
	cond := func(typ string, st metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason, LastTransitionTime: metav1.Time{Time: at}}
	}
	history := func() usage.Workload {
		for _, s := range c.wls {
			if s.w.Name == "job-w" {
				return s.w
			}
		}
		return usage.Workload{}
	}
	for _, step := range []struct {
		conds []metav1.Condition
		done  func(usage.Workload) bool
	}{
		{[]metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", m(5))},
			func(w usage.Workload) bool { return len(w.Admissions) == 1 }},
		{[]metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", m(40)), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, m(40))},
			func(w usage.Workload) bool { return len(w.Preemptions) == 1 }},
		{[]metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", m(54)), cond(kueue.WorkloadEvicted, metav1.ConditionFalse, "Readmitted", m(54))},
			func(w usage.Workload) bool { return len(w.Admissions) == 2 }},
		{[]metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", m(54)), cond(kueue.WorkloadEvicted, metav1.ConditionFalse, "Readmitted", m(54)),
			cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", m(58))},
			func(w usage.Workload) bool { return !w.Finished.IsZero() }},
	} {
		w, err := kq.KueueV1beta2().Workloads(ns).Get(ctx, "job-w", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Status.Conditions = step.conds
		if _, err := kq.KueueV1beta2().Workloads(ns).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, fmt.Sprintf("job-w with %v", step.conds), func() bool { return step.done(history()) })
	}
	clk.set(m(60))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stop()

	// The oracle, from the times above: hour B-1h, job-w waited (from C);
	// hour B, the pod held 8 GPUs for 35 min (all within red's 8), job-w
	// waited, was preempted once, and was admitted twice, after
	// wait0 = B+5m - C and after 14 min; nearest-rank p50 of two waits is
	// the smaller, p90 and p99 the larger.
	wait0, wait1 := int64(m(5).Sub(C)/time.Second), int64(14*60)
	lo, hi := min(wait0, wait1), max(wait0, wait1)
	want := []usage.Hour{
		{Team: "red", Namespace: ns, InstanceType: p5, Start: B.Add(-time.Hour), Pending: 1, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
		{Team: "red", Namespace: ns, InstanceType: p5, Start: B, GuaranteedAccelSeconds: 8 * 35 * 60, Running: 1, Pending: 1, Preempted: 1,
			WaitP50Seconds: lo, WaitP90Seconds: hi, WaitP99Seconds: hi, Source: usage.SourceCluster},
	}
	wantHistory := usage.Workload{Key: string(owner.UID), Name: "job-w", Team: "red", Namespace: ns, InstanceType: p5, Created: C, Finished: m(58),
		Pending:     []usage.Span{{From: C, To: m(5)}, {From: m(40), To: m(54)}},
		Admissions:  []usage.Admission{{At: m(5), WaitSeconds: wait0}, {At: m(54), WaitSeconds: wait1}},
		Preemptions: []time.Time{m(40)}}
	check := func(when string) {
		t.Helper()
		all, err := db.UsageHours(ctx, store.UsageFilter{From: B.Add(-2 * time.Hour), To: B.Add(3 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if got := mine(all, ns); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: hours\n%+v\nwant\n%+v", when, got, want)
		}
		recs, err := db.UsageRecordsOf(ctx, cluster, []string{string(pod.UID)}, []string{string(owner.UID)})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs.Workloads) != 1 || !reflect.DeepEqual(recs.Workloads[0], wantHistory) {
			t.Errorf("%s: job-w's recorded history\n%+v\nwant\n%+v", when, recs.Workloads, wantHistory)
		}
		if len(recs.Allocs) != 1 || recs.Allocs[0].InstanceType != p5 || recs.Allocs[0].Accelerators != 8 || !recs.Allocs[0].End.Equal(m(40)) {
			t.Errorf("%s: the pod's record %+v", when, recs.Allocs)
		}
	}
	check("first run")

	// While the collector is down the node goes; the pod object stays.
	if err := kube.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restart := func(name string, at time.Time, staleBefore time.Time) {
		t.Helper()
		clk.set(at)
		c = newCollector(name)
		last, err := db.ClaimCollector(ctx, cluster, name, at, staleBefore)
		if err != nil {
			t.Fatal(err)
		}
		stop, err := c.Start(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		// Nothing before the last heartbeat changed: nothing before it is
		// recomputed.
		c.mu.Lock()
		from := c.dirtyFrom
		c.mu.Unlock()
		if from.Before(last) {
			t.Errorf("%s: after the start, hours from %s are to be recomputed; nothing before the heartbeat %s changed", name, from, last)
		}
		clk.set(at.Add(5 * time.Minute))
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restart("one", m(70), m(69)) // the same replica restarts
	check("after a restart")
	restart("two", m(100), m(97)) // another replica takes over (one's heartbeat, B+75m, is stale)
	check("after a hand-over")
}
