package collect

// Priority and preemption on the real controllers (issue 34, item 6): two
// teams provisioned by the portal's own plan and steps on the scheduling
// cluster, one whose contract lets its tasks preempt lower-priority ones
// (ClusterQueue spec.preemption.withinClusterQueue LowerPriority) and one
// whose contract says never (Never): the plan's mapping is
// internal/provision plan.go clusterQueue. A higher-priority job arrives in
// each full queue; Kueue preempts in the first and not in the second; the
// collector, running throughout against a real store, must count the
// preemption for the first team only, hour by hour as Kueue recorded it,
// and not count the eviction of the second team's job by a hold's drain.
// TestSchedPriorityPreemptionHyperPodQueues plays the same on queues made as
// HyperPod task governance makes them.
//
// Kueue (sigs.k8s.io/kueue@v0.17.0): withinClusterQueue LowerPriority lets
// a pending Workload preempt admitted ones of lower priority in its own
// ClusterQueue, Never never (apis/kueue/v1beta2/clusterqueue_types.go
// ClusterQueuePreemption.WithinClusterQueue); a Workload so preempted gets
// condition Preempted True with reason InClusterQueue and Evicted True with
// reason Preempted (apis/kueue/v1beta2/workload_types.go
// InClusterQueueReason, WorkloadEvictedByPreemption); a Workload that cannot
// be admitted gets QuotaReserved False with reason Pending and the
// scheduler's message, which ends in "Pending the preemption of N
// workload(s)" when it preempts (pkg/scheduler/scheduler.go
// requeueAndUpdate and schedule).

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// teamPlan is the portal's plan for team, guaranteed one ml.p5.48xlarge
// and preempting as pre says, the portal managing the queues when
// portalQueues (no cohort: each team keeps to its own ClusterQueue), or
// leaving them to HyperPod.
func teamPlan(t *testing.T, id int64, team string, pre workflow.Preemption, portalQueues bool) provision.Plan {
	t.Helper()
	ct := workflow.ExampleContractFor(team)
	ct.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: hpcluster.P5.Name, Count: 1}}
	ct.Scheduling.Preemption = pre
	ct = ct.Normalize()
	s := provision.DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = portalQueues
	p, err := provision.BuildPlan(id, 1, ct.Hash(), ct, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// provisionAll applies the plans on the scheduling cluster with the
// provisioner's own steps (what a provisioning job runs), everything they
// make deleted when the test ends.
func provisionAll(t *testing.T, c *hpcluster.Cluster, plans ...provision.Plan) *provision.Applier {
	t.Helper()
	a, err := provision.NewApplier(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, p := range plans {
		for _, o := range p.Objects {
			objs = append(objs, o.Obj)
		}
	}
	c.DeleteAtCleanup(t, objs...)
	for _, p := range plans {
		for _, st := range provision.ApplySteps(p) {
			if st.AWS != nil {
				continue
			}
			if _, _, err := (provision.ApplierSteps{Applier: a}).RunStep(t.Context(), st); err != nil {
				t.Fatalf("%s: step %s: %v", p.Team, st.Name(), err)
			}
		}
	}
	return a
}

// preemptionSide is one team of the preemption scenario: its contract's
// preemption, the withinClusterQueue its ClusterQueue must have, the team's
// queues, and its jobs.
type preemptionSide struct {
	pre       workflow.Preemption
	within    kueue.PreemptionPolicy
	team      hpcluster.Team
	low, high *batchv1.Job
}

func TestSchedPriorityPreemption(t *testing.T) {
	c := hpcluster.Connect(t)
	ctx := t.Context()
	for i := range 2 {
		c.AddNode(t, fmt.Sprintf("p5-%d", i), hpcluster.P5)
	}
	run := fmt.Sprintf("%06x", time.Now().UnixNano()&0xffffff)
	sides := []*preemptionSide{
		{pre: workflow.PreemptLowerPriority, within: kueue.PreemptionPolicyLowerPriority},
		{pre: workflow.PreemptNever, within: kueue.PreemptionPolicyNever},
	}
	var plans []provision.Plan
	for i, sd := range sides {
		plans = append(plans, teamPlan(t, int64(i+1), fmt.Sprintf("p%d%s", i, run), sd.pre, true))
	}
	a := provisionAll(t, c, plans...)
	for i, sd := range sides {
		name := plans[i].Team
		for _, o := range plans[i].Objects {
			switch o.Kind {
			case "ClusterQueue":
				cq, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, o.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := cq.Spec.Preemption.WithinClusterQueue; got != sd.within {
					t.Fatalf("contract preemption %s made withinClusterQueue %s, want %s", sd.pre, got, sd.within)
				}
				sd.team.ClusterQueue = o.Name
			case "LocalQueue":
				sd.team = hpcluster.Team{Name: name, Namespace: o.Namespace, LocalQueue: o.Name, ClusterQueue: sd.team.ClusterQueue}
			}
		}
	}
	preemptionScenario(t, c, run, sides, plans, a)
}

// TestSchedPriorityPreemptionHyperPodQueues is the same scenario on
// queues HyperPod task governance made (hpcluster.AddHyperPodTeam, each
// field owned by HyperPod's field manager): a compute quota's
// PreemptTeamTasks LowerPriority or Never becomes the ClusterQueue's
// withinClusterQueue, as the portal's plan maps the contract's preemption
// in the portal-managed mode (CreateComputeQuota, ComputeQuotaConfig
// PreemptTeamTasks; platform-reference). The portal provisions the rest
// of each team (plans in HyperPod-managed mode, which leave HyperPod's
// queues alone) and drains the second team's LocalQueue through its hold
// steps, which must not conflict with HyperPod's ownership; the collector
// counts the one preemption for the first team.
func TestSchedPriorityPreemptionHyperPodQueues(t *testing.T) {
	c := hpcluster.Connect(t)
	for i := range 2 {
		c.AddNode(t, fmt.Sprintf("p5-%d", i), hpcluster.P5)
	}
	// What HyperPod's cluster policy and instance groups make, shared by
	// the teams: the flavor and the priority classes (the plan leaves them
	// to HyperPod in this mode).
	c.AddFlavor(t, hpcluster.P5)
	for _, pc := range provision.DefaultClusterSettings().PriorityClasses {
		c.AddPriorityClass(t, pc.Name, pc.Value)
	}
	run := fmt.Sprintf("%06x", time.Now().UnixNano()&0xffffff)
	sides := []*preemptionSide{
		{pre: workflow.PreemptLowerPriority, within: kueue.PreemptionPolicyLowerPriority},
		{pre: workflow.PreemptNever, within: kueue.PreemptionPolicyNever},
	}
	var plans []provision.Plan
	for i, sd := range sides {
		name := fmt.Sprintf("h%d%s", i, run)
		// Each team alone in its cohort: no borrowing between them.
		sd.team = c.AddHyperPodTeamPreempting(t, name, "alone-"+name, sd.within,
			hpcluster.Guarantee{Flavor: hpcluster.P5, Resource: hpcluster.ResourceGPU, Count: 8})
		p := teamPlan(t, int64(i+1), name, sd.pre, false)
		for _, o := range p.Objects {
			if (o.Kind == "LocalQueue" || o.Kind == "ClusterQueue" || o.Kind == "Namespace") && o.Owner == provision.OwnerPortal {
				t.Fatalf("the HyperPod-managed plan makes %s %s itself", o.Kind, o.Name)
			}
		}
		plans = append(plans, p)
	}
	a := provisionAll(t, c, plans...)
	preemptionScenario(t, c, run, sides, plans, a)
}

// preemptionScenario fills each side's queue with a low-priority job, sends
// a high-priority one, checks that Kueue preempts in the first side's queue
// and not in the second's, drains the second's LocalQueue with the
// portal's hold steps, and compares the collector's preemptions per team
// and hour with Kueue's record of them.
func preemptionScenario(t *testing.T, c *hpcluster.Cluster, run string, sides []*preemptionSide, plans []provision.Plan, a *provision.Applier) {
	t.Helper()
	ctx := t.Context()
	// The collector follows the cluster from before the first job, as it
	// does in production, into a real store.
	db := migratedDB(t)
	col := &Collector{Kube: c.Kube, Kueue: c.Kueue, Store: db, Cluster: "sched-" + run, Owner: "test",
		Interval: time.Hour,
		Guarantees: accelOnly(func(context.Context) (usage.GuaranteeHistory, error) {
			return usage.GuaranteeHistory{}, nil
		})}
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- col.Run(runCtx) }()
	defer stopRun()
	waitFor(t, col, "the collector started", func() bool { return col.synced })

	// Each queue is full with a low-priority job (6 of its 8 GPUs; the
	// namespace quota, 8 + 50% borrowing, holds two such pods, the running
	// one and the next); then a higher-priority one arrives.
	low := provision.DefaultClusterSettings().KueuePriorityClass("experiment") // value 100
	high := provision.DefaultClusterSettings().KueuePriorityClass("training")  // value 500
	job := func(team hpcluster.Team, name, class string) *batchv1.Job {
		return c.SubmitJob(t, team, hpcluster.JobSpec{Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 6,
			PriorityClass: class, RunFor: 10 * time.Minute})
	}
	for _, sd := range sides {
		sd.low = job(sd.team, "low", low)
		c.WaitWorkload(t, sd.low, "admitted", hpcluster.Admitted)
		c.WaitRunning(t, sd.low, 1)
	}
	for _, sd := range sides {
		sd.high = job(sd.team, "high", high)
	}

	// LowerPriority: Kueue preempts the low job for the high one.
	pre := sides[0]
	wl := c.WaitWorkload(t, pre.low, "preempted", func(wl *kueue.Workload) bool {
		return hpcluster.CondTrue(wl.Status.Conditions, kueue.WorkloadPreempted)
	})
	if pc := hpcluster.Cond(wl.Status.Conditions, kueue.WorkloadPreempted); pc.Reason != kueue.InClusterQueueReason {
		t.Errorf("low preempted for %s (%s); want %s", pc.Reason, pc.Message, kueue.InClusterQueueReason)
	}
	c.WaitWorkload(t, pre.high, "admitted", hpcluster.Admitted)
	c.WaitRunning(t, pre.high, 1)

	// Never: the high job waits, with Kueue's reason, and preempts nothing.
	never := sides[1]
	pending := c.WaitWorkload(t, never.high, "pending for want of quota", func(wl *kueue.Workload) bool {
		qr := hpcluster.Cond(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		return qr != nil && qr.Status == metav1.ConditionFalse && qr.Reason == "Pending"
	})
	if msg := hpcluster.Cond(pending.Status.Conditions, kueue.WorkloadQuotaReserved).Message; strings.Contains(msg, "preemption") || !strings.Contains(msg, "insufficient") {
		t.Errorf("high under Never pending with %q; want insufficient quota and no preemption", msg)
	}
	if wl, err := c.WorkloadOf(ctx, never.low); err != nil {
		t.Fatal(err)
	} else if !hpcluster.Admitted(wl) || hpcluster.CondTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
		t.Errorf("low under Never: conditions %+v; want admitted, never evicted", wl.Status.Conditions)
	}

	// A hold's drain evicts too, and is no preemption: the portal's hold
	// step drains the second team's LocalQueue (HoldSteps, as a hold job
	// runs them), and Kueue evicts its low job for the stopped queue.
	for _, st := range provision.HoldSteps(plans[1], workflow.StopHoldAndDrain) {
		if _, _, err := (provision.ApplierSteps{Applier: a}).RunStep(ctx, st); err != nil {
			t.Fatalf("drain %s: %v", never.team.Name, err)
		}
	}
	c.WaitWorkload(t, never.low, "evicted by the drain", func(wl *kueue.Workload) bool {
		ev := hpcluster.Cond(wl.Status.Conditions, kueue.WorkloadEvicted)
		return ev != nil && ev.Status == metav1.ConditionTrue && !hpcluster.Admitted(wl) &&
			(ev.Reason == kueue.WorkloadEvictedByLocalQueueStopped || ev.Reason == kueue.WorkloadEvictedByClusterQueueStopped)
	})

	// The oracle: each Workload Kueue marked Preempted and evicted for
	// it, counted for the team of its namespace in the hour of its
	// eviction, from the conditions as Kueue recorded them.
	oracle := map[string]int{} // "team hour" -> preemptions
	var all []kueue.Workload
	for _, sd := range sides {
		list, err := c.Kueue.KueueV1beta2().Workloads(sd.team.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, wl := range list.Items {
			ev := hpcluster.Cond(wl.Status.Conditions, kueue.WorkloadEvicted)
			if hpcluster.CondTrue(wl.Status.Conditions, kueue.WorkloadPreempted) && ev != nil && ev.Status == metav1.ConditionTrue && ev.Reason == kueue.WorkloadEvictedByPreemption {
				oracle[fmt.Sprintf("%s %s", sd.team.Name, usage.HourStart(ev.LastTransitionTime.UTC()).Format(time.RFC3339))]++
			}
		}
		all = append(all, list.Items...)
	}
	if len(oracle) != 1 {
		t.Fatalf("Kueue's record shows preemptions %v; the scenario wants exactly one, in %s", oracle, pre.team.Name)
	}

	// Once the collector has taken in every Workload as it now stands
	// (admitted or not), its final flush records the hours.
	waitFor(t, col, "every Workload's latest admission state", func() bool {
		for i := range all {
			st := col.wls[types.UID(workloadKey(&all[i]))]
			if st == nil || st.admittedAt.IsZero() == hpcluster.Admitted(&all[i]) {
				return false
			}
		}
		return true
	})
	stopRun()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := map[string]int{}
	now := time.Now()
	for _, sd := range sides {
		rows, err := db.UsageHours(ctx, store.UsageFilter{Team: sd.team.Name, From: now.Add(-2 * time.Hour), To: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range usage.SumByHour(rows) {
			if h.Preempted != 0 {
				got[fmt.Sprintf("%s %s", sd.team.Name, h.Start.UTC().Format(time.RFC3339))] += h.Preempted
			}
		}
	}
	if !maps.Equal(got, oracle) {
		t.Errorf("the portal's preemptions per team and hour = %v; Kueue's record says %v", got, oracle)
	}
	t.Logf("preemptions per team and hour: portal %v, Kueue %v", got, oracle)
}
