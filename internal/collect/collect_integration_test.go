package collect

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
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

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// waitFor polls the collector's state until cond holds: informer events
// arrive asynchronously. It is not a timing assertion; the deadline only
// turns a lost event into a failure instead of a hang.
func waitFor(t *testing.T, c *Collector, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector never saw: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The collector against the test bed's real kube-apiserver with Kueue's
// CRDs: nodes with instance-type and health labels, pods whose status is
// set through the status subresource as a kubelet would, a Workload
// admitted, preempted and readmitted, a ClusterQueue reporting borrowed
// quota, and a restart in the middle (a pod finishing and a pod deleted
// while it was down). Every figure is computed by hand below.
func TestCollectorIntegration(t *testing.T) {
	kube, kq := testbedClients(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	db := migratedDB(t)

	sfx := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	// Instance types of this run only, so other tests' nodes do not count.
	p5, g5 := "ml.u"+sfx+".48xlarge", "ml.v"+sfx+".8xlarge"
	redNS, blueNS, otherNS := "usage-red-"+sfx, "usage-blue-"+sfx, "usage-other-"+sfx
	for ns, team := range map[string]string{redNS: "red", blueNS: "blue", otherNS: ""} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if team != "" {
			n.Labels = map[string]string{provision.LabelTeam: team}
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	n1, n2 := "usage-n1-"+sfx, "usage-n2-"+sfx
	for _, name := range []string{n1, n2} {
		createNode(ctx, t, kube, name, p5, "8")
	}

	// n3, a g5 with 1 GPU, is deleted while the collector is down.
	n3 := "usage-n3-" + sfx
	createNode(ctx, t, kube, n3, g5, "1")
	// The Workload belongs to a job (here a ConfigMap stands in as its
	// controller owner, so the garbage collector keeps it): its key in the
	// records is the owner's UID.
	owner, err := kube.CoreV1().ConfigMaps(redNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-w"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The Workload first: its creation time C is the server's; B, the
	// scenario's first hour, is the hour after C.
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-w", Namespace: redNS,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr(true)}}},
		Spec: kueue.WorkloadSpec{
			PriorityClassRef: kueue.NewWorkloadPriorityClassRef("training"), Priority: ptr(int32(100)),
			PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector:  map[string]string{corev1.LabelInstanceTypeStable: p5},
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "train"}}}}}}}}
	if wl, err = kq.KueueV1beta2().Workloads(redNS).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	C := wl.CreationTimestamp.UTC()
	B := usage.HourStart(C).Add(time.Hour)
	m := func(min int) time.Time { return B.Add(time.Duration(min) * time.Minute) }

	clk := &clock{t: B}
	guar := usage.Guarantees{"red": {p5: 8}}
	newCollector := func(owner string) *Collector {
		return &Collector{Kube: kube, Kueue: kq, Store: db, Cluster: "hp-" + sfx, Owner: owner, Now: clk.now,
			Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) { return guar.History(), nil })}
	}

	// First start at B: the nodes are seen at B.
	c := newCollector("one")
	if _, err := db.ClaimCollector(ctx, c.Cluster, "one", B, B.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	stop, err := c.Start(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}

	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "usage-red-cq-" + sfx}}
	if cq, err = kq.KueueV1beta2().ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kq.KueueV1beta2().ClusterQueues().Delete(context.Background(), cq.Name, metav1.DeleteOptions{})
	})
	cq.Status.FlavorsUsage = []kueue.FlavorUsage{{Name: kueue.ResourceFlavorReference(p5), Resources: []kueue.ResourceUsage{
		{Name: ResourceGPU, Total: resource.MustParse("12"), Borrowed: resource.MustParse("4")}}}}
	if _, err := kq.KueueV1beta2().ClusterQueues().UpdateStatus(ctx, cq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Pods, their status set as the kubelet would.
	type podSpec struct {
		ns, name, node string
		gpu, cpu, mem  string
		start          time.Time
	}
	mkPod := func(p podSpec) *corev1.Pod {
		t.Helper()
		req := corev1.ResourceList{ResourceGPU: resource.MustParse(p.gpu)}
		if p.cpu != "" {
			req[corev1.ResourceCPU], req[corev1.ResourceMemory] = resource.MustParse(p.cpu), resource.MustParse(p.mem)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns},
			Spec: corev1.PodSpec{NodeName: p.node, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "train", Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{ResourceGPU: resource.MustParse(p.gpu)}}}}}}
		pod, err := kube.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase, pod.Status.StartTime = corev1.PodRunning, &metav1.Time{Time: p.start}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "train", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: p.start}}}}}
		if pod, err = kube.CoreV1().Pods(p.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	finish := func(pod *corev1.Pod, at time.Time) {
		t.Helper()
		pod, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "train",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: *pod.Status.StartTime, FinishedAt: metav1.Time{Time: at}}}}}
		if _, err := kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podA := mkPod(podSpec{redNS, "a", n1, "8", "4", "1Gi", m(10)})
	podB := mkPod(podSpec{redNS, "b", n2, "4", "1", "512Mi", m(20)})
	podC := mkPod(podSpec{blueNS, "c", n2, "2", "", "", m(30)})
	finish(podC, m(30).Add(40*time.Second))
	mkPod(podSpec{otherNS, "d", n1, "8", "1", "1Gi", m(10)}) // not a team namespace: not counted
	waitFor(t, c, "pods a, b and c finished", func() bool {
		pc := c.pods[podC.UID]
		return c.pods[podA.UID] != nil && c.pods[podB.UID] != nil && pc != nil && !pc.End.IsZero()
	})

	// The Workload: admitted at B+5m, preempted at B+40m.
	setWL := func(conds ...metav1.Condition) {
		t.Helper()
		w, err := kq.KueueV1beta2().Workloads(redNS).Get(ctx, "job-w", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Status.Conditions = conds
		w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq.Name), PodSetAssignments: []kueue.PodSetAssignment{{
			Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{ResourceGPU: kueue.ResourceFlavorReference(p5)}, Count: ptr(int32(1))}}}
		if _, err := kq.KueueV1beta2().Workloads(redNS).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cond := func(typ string, st metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason, LastTransitionTime: metav1.Time{Time: at}}
	}
	wlState := func() *wlState {
		for _, s := range c.wls {
			if s.w.Name == "job-w" {
				return s
			}
		}
		return &wlState{}
	}
	setWL(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", m(5)), cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", m(5)))
	waitFor(t, c, "job-w admitted", func() bool { return len(wlState().w.Admissions) == 1 })
	setWL(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", m(40)), cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "NoReservation", m(40)),
		cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, m(40)))
	waitFor(t, c, "job-w preempted", func() bool { return len(wlState().w.Preemptions) == 1 })

	// Node n2 fails its health checks at B+50m.
	clk.set(m(50))
	node, err := kube.CoreV1().Nodes().Get(ctx, n2, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[LabelNodeHealth] = "UnschedulablePendingReboot"
	if _, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "n2 unhealthy", func() bool { return c.nodes[n2] != nil && !c.nodes[n2].span.Schedulable })
	waitFor(t, c, "the ClusterQueue's borrowing", func() bool { return c.queues[cq.Name][p5+"/nvidia.com/gpu"] == 4 })

	// B+60m: flush, and the collector stops.
	clk.set(m(60))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	hourB := func() []usage.Hour {
		got, err := db.UsageHours(ctx, store.UsageFilter{From: B, To: B.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return mine(got, redNS, blueNS)
	}
	firstB := hourB()

	// While it is down: b finishes at B+75m (its status keeps it), a is
	// deleted (gone for good), and job-w is readmitted at B+70m.
	finish(podB, m(75))
	if err := kube.CoreV1().Pods(redNS).Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, n3, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setWL(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", m(70)), cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", m(70)),
		cond(kueue.WorkloadEvicted, metav1.ConditionFalse, "Readmitted", m(70)))

	// B+90m: another instance takes over (the first's heartbeat, B+60m, is
	// stale) and reconciles; B+120m: it flushes.
	clk.set(m(90))
	c = newCollector("two")
	last, err := db.ClaimCollector(ctx, c.Cluster, "two", m(90), m(87))
	if err != nil || !last.Equal(m(60)) {
		t.Fatalf("takeover: %v, %v", last, err)
	}
	stop, err = c.Start(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "job-w readmitted", func() bool { return len(wlState().w.Admissions) == 2 })
	clk.set(m(120))
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stop()

	wait0 := int64(m(5).Sub(C.Truncate(time.Second)) / time.Second) // job-w's first wait: C -> B+5m
	row := func(team, ns string, start time.Time, g, b, cpu, mem int64, run, pend, pre int, waits ...int64) usage.Hour {
		h := usage.Hour{Team: team, Namespace: ns, InstanceType: p5, Start: start, GuaranteedAccelSeconds: g, BorrowedAccelSeconds: b,
			CPUMilliSeconds: cpu, MemoryMiBSeconds: mem, Running: run, Pending: pend, Preempted: pre,
			WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster}
		if len(waits) == 1 {
			h.WaitP50Seconds, h.WaitP90Seconds, h.WaitP99Seconds = waits[0], waits[0], waits[0]
		}
		return h
	}
	want := []usage.Hour{
		// B-1h: job-w waited from C.
		row("red", redNS, B.Add(-time.Hour), 0, 0, 0, 0, 0, 1, 0),
		// B: c (blue, no guarantee) 2 GPUs x 40 s = 80 borrowed.
		row("blue", blueNS, B, 0, 80, 0, 0, 1, 0, 0),
		// B: a 8 GPUs B+10m -> B+60m = 3000 s: 24000 guaranteed (first,
		// fills red's 8); b 4 GPUs B+20m -> B+60m = 2400 s: 9600 borrowed.
		// CPU 4000x3000 + 1000x2400 = 14,400,000; memory 1024x3000 +
		// 512x2400 = 4,300,800. job-w waited (C -> B+5m, B+40m -> ...),
		// was preempted once, and admitted after wait0.
		row("red", redNS, B, 24000, 9600, 14_400_000, 4_300_800, 2, 1, 1, wait0),
		// B+1h: a is gone (counted until the heartbeat, B+60m); b alone
		// until it finished at B+75m: 4 x 900 = 3600, all guaranteed; CPU
		// 1000x900, memory 512x900. job-w waited until B+70m and was
		// readmitted after 30 min = 1800 s.
		row("red", redNS, B.Add(time.Hour), 3600, 0, 900_000, 460_800, 1, 1, 0, 1800),
	}
	all, err := db.UsageHours(ctx, store.UsageFilter{From: B.Add(-time.Hour), To: B.Add(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(all, redNS, blueNS); !reflect.DeepEqual(got, want) {
		t.Errorf("hours:\n%+v\nwant\n%+v", got, want)
	}
	// The restart recomputed nothing of hour B: no double count.
	if got := hourB(); !reflect.DeepEqual(got, firstB) {
		t.Errorf("hour B changed across the restart:\n%+v\nwas\n%+v", got, firstB)
	}

	// Capacity: n1 8 x 3600 = 28800 in both hours; n2 8 x 3000 (B ->
	// B+50m) then unhealthy 600 + 3600 node-seconds. Allocated in B: a
	// 24000 + b 9600 + c 80 = 33680 (d, outside team namespaces, is not a
	// team's); in B+1h: b 3600.
	ch, err := db.ClusterHours(ctx, c.Cluster, B.Add(-time.Hour), B.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	wantCH := []usage.ClusterHour{
		{Cluster: c.Cluster, InstanceType: p5, Start: B, CapacityAccelSeconds: 52800, AllocatedAccelSeconds: 33680, UnhealthyNodeSeconds: 600, Source: usage.SourceCluster},
		{Cluster: c.Cluster, InstanceType: p5, Start: B.Add(time.Hour), CapacityAccelSeconds: 28800, AllocatedAccelSeconds: 3600, UnhealthyNodeSeconds: 3600, Source: usage.SourceCluster},
	}
	// (Only this run's instance types: the test bed is shared.) n3 (g5, 1 GPU) offered 1 x 3600 in B and, deleted while the
	// collector was down, is counted until the heartbeat (B+60m): no g5
	// row in B+1h.
	ch = slices.DeleteFunc(ch, func(h usage.ClusterHour) bool { return h.InstanceType != p5 && h.InstanceType != g5 })
	wantCH = slices.Insert(wantCH, 1, usage.ClusterHour{Cluster: c.Cluster, InstanceType: g5, Start: B, CapacityAccelSeconds: 3600, Source: usage.SourceCluster})
	if !reflect.DeepEqual(ch, wantCH) {
		t.Errorf("cluster hours:\n%+v\nwant\n%+v", ch, wantCH)
	}

	// One missing period: from the heartbeat to the restart, naming a.
	miss, err := db.MissingIn(ctx, B, B.Add(3*time.Hour))
	if err != nil || len(miss) != 1 || !miss[0].From.Equal(m(60)) || !miss[0].To.Equal(m(90)) || !strings.Contains(miss[0].Reason, redNS+"/a") {
		t.Errorf("missing = %+v, %v", miss, err)
	}

	// The task report over B -> B+2h.
	tasks, err := db.UsageTasks(ctx, store.TaskFilter{Cluster: c.Cluster, Team: "red", Namespace: redNS, From: B, To: m(120)})
	if err != nil || len(tasks) != 2 || tasks[0].Task != "a" || tasks[0].AccelSeconds != 24000 || tasks[0].Status != "Gone" ||
		tasks[1].Task != "b" || tasks[1].AccelSeconds != 9600+3600 || tasks[1].Status != "Succeeded" || !tasks[1].End.Equal(m(75)) {
		t.Errorf("tasks = %+v, %v", tasks, err)
	}
}

// mine keeps the rows of this test's namespaces (the test bed is shared).
func mine(hs []usage.Hour, nss ...string) []usage.Hour {
	var out []usage.Hour
	for _, h := range hs {
		for _, ns := range nss {
			if h.Namespace == ns {
				out = append(out, h)
			}
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
