package provision_test

// Holds on a scheduler (issue 34, item 4): the portal's worker runs real
// hold jobs against the test bed's scheduling cluster (hack/testbed/
// cluster.sh: kube-scheduler, the Kueue v0.17.0 controller manager and
// kwok), and the test watches what Kueue itself does with the team's
// workloads. Nothing here writes a Workload's status.
//
// What Kueue does with a stopped LocalQueue (sigs.k8s.io/kueue@v0.17.0,
// apis/kueue/v1beta2/localqueue_types.go LocalQueueSpec.StopPolicy: "if set
// to a value different from None, the LocalQueue is considered Inactive, no
// new reservation being made ... HoldAndDrain - Admitted workloads are
// evicted ... Hold - Admitted workloads will run to completion"), as
// pkg/controller/core/workload_controller.go implements it: a Workload
// without quota whose LocalQueue is stopped gets QuotaReserved False with
// reason Inadmissible, "LocalQueue <name> is inactive"; an admitted one
// under HoldAndDrain is evicted with reason LocalQueueStopped
// (reconcileOnLocalQueueActiveState; ClusterQueueStopped when its
// ClusterQueue is the stopped one, reconcileOnClusterQueueActiveState); once
// the queue is None again, Kueue requeues what it evicted
// (WorkloadLocalQueueRestarted / WorkloadClusterQueueRestarted).

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// holdBed is one team provisioned by the portal's worker on the
// scheduling cluster, guaranteed one ml.p5.48xlarge (8 GPUs) on the one
// such node there.
type holdBed struct {
	c      *hpcluster.Cluster
	b      *wbed
	w      *provision.Worker
	tn     wintTenant
	team   hpcluster.Team
	queues []provision.Object // the plan's queues a hold stops
	held   []string           // the step details of the journey's hold job
}

func newHoldBed(t *testing.T, portalManaged bool) *holdBed {
	c := hpcluster.Connect(t)
	c.AddNode(t, "p5-0", hpcluster.P5)
	name := "hold" + wintRandom(t)
	b := newWBedWith(t, "", c.Config)
	s := provision.DefaultClusterSettings()
	if portalManaged {
		s.ClusterQueueManagedByPortal = true
	} else {
		// What task governance makes from the team's compute quota, made
		// as HyperPod makes it (hpcluster.HyperPodFieldManager).
		c.AddFlavor(t, hpcluster.P5)
		c.AddHyperPodTeam(t, name, "hyperpod", hpcluster.Guarantee{Flavor: hpcluster.P5, Resource: hpcluster.ResourceGPU, Count: 8})
	}
	b.useSettings(s)
	b.edit = func(ct *workflow.Contract) {
		ct.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: hpcluster.P5.Name, Count: 1}}
	}
	ctx := t.Context()
	tn := b.approve(ctx, name, b.plans)
	var objs []*unstructured.Unstructured
	for _, o := range tn.plan.Objects {
		objs = append(objs, o.Obj)
	}
	c.DeleteAtCleanup(t, objs...)

	reader, err := provision.NewClusterReader(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := b.worker("sched")
	w.Preflight = reader.RequireServed
	b.runOnce(ctx, w)
	if j := b.job(ctx, tn.job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("provisioning job = %s: %s", j.State, j.LastError)
	}
	h := &holdBed{c: c, b: b, w: w, tn: tn}
	for _, o := range tn.plan.Objects {
		if provision.IsQueue(o) {
			h.queues = append(h.queues, o)
		}
		if o.Kind == "LocalQueue" {
			h.team = hpcluster.Team{Name: name, Namespace: o.Namespace, LocalQueue: o.Name}
		}
	}
	if want := map[bool]int{true: 2, false: 1}[portalManaged]; len(h.queues) != want || h.team.LocalQueue == "" {
		t.Fatalf("plan queues = %+v, want %d with the LocalQueue", h.queues, want)
	}
	return h
}

// stopPolicies is each queue's live spec.stopPolicy, "Kind=policy".
func (h *holdBed) stopPolicies(ctx context.Context) string {
	h.b.tb.Helper()
	var out []string
	for _, o := range h.queues {
		live, err := h.b.live(ctx, o)
		if err != nil {
			h.b.tb.Fatal(err)
		}
		p, _, _ := unstructured.NestedString(live.Object, "spec", "stopPolicy")
		out = append(out, o.Kind+"="+p)
	}
	return strings.Join(out, " ")
}

// hold records the hold step as an admin does, runs the hold job it queues
// through the worker and returns the job's step details.
func (h *holdBed) hold(ctx context.Context, step workflow.HoldStep, policy string) []string {
	t, b := h.b.tb, h.b
	t.Helper()
	b.clock.Add(time.Minute)
	if step == workflow.HoldStepConfirm {
		if _, err := b.db.ProposeHold(ctx, h.tn.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "no longer used", b.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	_, jobID, err := b.db.DecideHold(ctx, h.tn.conn.ID, step, b.admin, step == workflow.HoldStepDrain, "test "+string(step), b.clock.Now())
	if err != nil || jobID == 0 {
		t.Fatalf("%s: job %d, %v", step, jobID, err)
	}
	b.runOnce(ctx, h.w)
	if j := b.job(ctx, jobID); j.State != workflow.JobSucceeded || j.Kind != workflow.JobHold {
		t.Fatalf("%s job = %s %s: %s", step, j.Kind, j.State, j.LastError)
	}
	var details []string
	for _, s := range b.steps(ctx, jobID) {
		details = append(details, s.Detail)
	}
	var want []string
	for _, o := range h.queues {
		want = append(want, o.Kind+"="+policy)
	}
	if got := h.stopPolicies(ctx); got != strings.Join(want, " ") {
		t.Fatalf("after %s: %s, want %s", step, got, strings.Join(want, " "))
	}
	return details
}

func (h *holdBed) submit(t *testing.T, name string) *batchv1.Job {
	// Four of the node's eight GPUs each, so that two fit the guarantee.
	// They run for longer than the test (its cleanup deletes them): the
	// hold must find one running.
	return h.c.SubmitJob(t, h.team, hpcluster.JobSpec{Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 4, RunFor: 10 * time.Minute})
}

// run is the journey on either mode: Hold keeps what runs and leaves new
// work pending, HoldAndDrain evicts what runs, release admits both.
// stoppedBy are the eviction reasons a drain may give.
func (h *holdBed) run(t *testing.T, stoppedBy ...string) {
	ctx := t.Context()
	start := time.Now()
	defer func() { t.Logf("hold, drain and release on Kueue took %s", time.Since(start).Round(time.Millisecond)) }()
	a := h.submit(t, "a")
	h.c.WaitWorkload(t, a, "admitted", hpcluster.Admitted)
	h.c.WaitRunning(t, a, 1)

	h.held = h.hold(ctx, workflow.HoldStepConfirm, workflow.StopHold)
	// Kueue's LocalQueue controller marks the queue inactive (condition
	// Active False, reason Stopped: pkg/controller/core/
	// localqueue_controller.go); only then is b submitted, so that Kueue
	// cannot have admitted it before it saw the hold.
	hpcluster.WaitFor(t, "Kueue sees "+h.team.LocalQueue+" stopped", func() (bool, error) {
		lq, err := h.c.Kueue.KueueV1beta2().LocalQueues(h.team.Namespace).Get(ctx, h.team.LocalQueue, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := hpcluster.Cond(lq.Status.Conditions, kueue.LocalQueueActive)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Stopped", nil
	})
	// The drift check on the real cluster (Kueue's webhooks and
	// controllers at work on the queues) sees the plan and the hold as
	// applied.
	checker := &provision.DriftChecker{
		List: func(ctx context.Context) ([]provision.ConnVersion, error) {
			return []provision.ConnVersion{{ConnectionID: h.tn.conn.ID, Version: h.tn.conn.ApprovedVersion}}, nil
		},
		Plans:        h.b.plans,
		CheckAll:     provision.DriftAllOf(h.b.look, nil),
		StopPolicies: h.b.db.HoldStopPolicies,
		Save:         h.b.db.SaveDrift,
		Clock:        h.b.clock.Now,
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		r, _ := h.b.db.Drift(ctx, h.tn.conn.ID)
		t.Errorf("drift while held: %d drifted (%+v), %v", n, r.Items, err)
	}
	b := h.submit(t, "b")
	inactive := "LocalQueue " + h.team.LocalQueue + " is inactive"
	wlB := h.c.WaitWorkload(t, b, "inadmissible: "+inactive, func(wl *kueue.Workload) bool {
		c := hpcluster.Cond(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == kueue.WorkloadInadmissible && c.Message == inactive
	})
	if wlB.Status.Admission != nil {
		t.Errorf("b reserved quota under a hold: %+v", wlB.Status.Admission)
	}
	// Kueue has taken b up and left it waiting; a still runs.
	wlA, err := h.c.WorkloadOf(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !hpcluster.Admitted(wlA) || hpcluster.CondTrue(wlA.Status.Conditions, kueue.WorkloadEvicted) {
		t.Errorf("a under Hold: conditions %+v; want still admitted, never evicted", wlA.Status.Conditions)
	}
	if pods, err := h.c.RunningPods(t, a); err != nil || len(pods) != 1 {
		t.Errorf("a's running pods under Hold = %d, %v; want its pod to go on", len(pods), err)
	}

	h.hold(ctx, workflow.HoldStepDrain, workflow.StopHoldAndDrain)
	wlA = h.c.WaitWorkload(t, a, "evicted by the drain", func(wl *kueue.Workload) bool {
		return hpcluster.CondTrue(wl.Status.Conditions, kueue.WorkloadEvicted) && !hpcluster.Admitted(wl)
	})
	if ev := hpcluster.Cond(wlA.Status.Conditions, kueue.WorkloadEvicted); !slices.Contains(stoppedBy, ev.Reason) {
		t.Errorf("a evicted for %s (%s); want one of %v", ev.Reason, ev.Message, stoppedBy)
	}
	if hpcluster.CondTrue(wlA.Status.Conditions, kueue.WorkloadPreempted) {
		t.Errorf("a drained by a hold shows Preempted: %+v", wlA.Status.Conditions)
	}
	// Kueue suspends the evicted Job, and its pod goes.
	hpcluster.WaitFor(t, "a suspended, its pod gone", func() (bool, error) {
		job, err := h.c.Kube.BatchV1().Jobs(a.Namespace).Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := h.c.RunningPods(t, a)
		return err == nil && job.Spec.Suspend != nil && *job.Spec.Suspend && len(pods) == 0, err
	})
	if wl, err := h.c.WorkloadOf(ctx, b); err != nil {
		t.Fatal(err)
	} else if wl.Status.Admission != nil {
		t.Errorf("b under HoldAndDrain: admission %+v; want still pending", wl.Status.Admission)
	}

	h.hold(ctx, workflow.HoldStepRelease, workflow.StopNone)
	for _, job := range []*batchv1.Job{a, b} {
		h.c.WaitWorkload(t, job, "admitted after the release", hpcluster.Admitted)
		h.c.WaitRunning(t, job, 1)
	}
}

// holdParallel: the two hold tests are parallel tests, so that they run
// after the package's sequential tests rather than among them. They
// share the scheduling cluster with the collector's and e2e's tests, one
// test at a time (hpcluster.Connect's lock); run among the sequential
// tests, internal/provision (the run's last package) stood still while
// they waited for it: 82 s in ci68, behind e2e's preemption test. By the
// end of the package's sequential tests the others are done with it.

// TestSchedHoldPortalManaged: the portal manages the team's ClusterQueue
// and LocalQueue, and a hold stops both.
func TestSchedHoldPortalManaged(t *testing.T) {
	t.Parallel() // see holdParallel
	h := newHoldBed(t, true)
	// The drain stops the ClusterQueue first (HoldSteps' order), so Kueue
	// may evict for either queue.
	h.run(t, kueue.WorkloadEvictedByLocalQueueStopped, kueue.WorkloadEvictedByClusterQueueStopped)
}

// TestSchedHoldHyperPodManaged: HyperPod task governance made the
// LocalQueue (a plain create under its own field manager, which so owns
// the defaulted spec.stopPolicy); the portal's hold takes that one field
// and stops the LocalQueue alone.
func TestSchedHoldHyperPodManaged(t *testing.T) {
	t.Parallel() // see holdParallel
	h := newHoldBed(t, false)
	ctx := t.Context()
	live, err := h.b.live(ctx, h.queues[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := provision.StopPolicyManagers(live); !slices.Equal(got, []string{hpcluster.HyperPodFieldManager}) {
		t.Fatalf("spec.stopPolicy of HyperPod's LocalQueue is owned by %v, want %s alone", got, hpcluster.HyperPodFieldManager)
	}
	h.run(t, kueue.WorkloadEvictedByLocalQueueStopped)
	// The hold took that field from HyperPod's manager, and said so.
	if len(h.held) != 1 || !strings.Contains(h.held[0], "took the field over from "+hpcluster.HyperPodFieldManager) {
		t.Errorf("hold step details = %q; want the field taken from %s", h.held, hpcluster.HyperPodFieldManager)
	}
}
