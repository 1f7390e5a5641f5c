package collect

// Scheduling tests: they run on the test bed's scheduling cluster
// (hack/testbed/cluster.sh: a real kube-scheduler, Kueue v0.17.0 and kwok),
// where Kueue itself admits, borrows and preempts. Nothing below writes a
// Workload's or a ClusterQueue's status: every condition and figure read is
// the one the controllers recorded.

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/support/hpcluster"
)

// cond returns the condition of type typ, or nil.
func cond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func condTrue(conds []metav1.Condition, typ string) bool {
	c := cond(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// usageOf is a ClusterQueue's usage of res on flavor, as Kueue reports it
// in status.flavorsUsage: total and borrowed.
func usageOf(cq *kueue.ClusterQueue, flavor string, res corev1.ResourceName) (total, borrowed int64) {
	for _, f := range cq.Status.FlavorsUsage {
		if string(f.Name) != flavor {
			continue
		}
		for _, r := range f.Resources {
			if r.Name == res {
				return r.Total.Value(), r.Borrowed.Value()
			}
		}
	}
	return 0, 0
}

// schedScenario is scenario 1's cluster: two p5 nodes (16 GPUs) where red
// and blue each hold a guarantee of 8 in cohort "hyperpod", plus a g5 and a
// Trainium node of other flavors that no team's work fits on.
type schedScenario struct {
	c         *hpcluster.Cluster
	red, blue hpcluster.Team
	training  string
}

func newSchedScenario(t *testing.T) *schedScenario {
	c := hpcluster.Connect(t)
	for i := range 2 {
		c.AddNode(t, fmt.Sprintf("p5-%d", i), hpcluster.P5)
	}
	c.AddNode(t, "g5-0", hpcluster.G5)
	c.AddNode(t, "trn1-0", hpcluster.Trn1)
	for _, it := range []hpcluster.InstanceType{hpcluster.P5, hpcluster.G5, hpcluster.Trn1} {
		c.AddFlavor(t, it)
	}
	s := &schedScenario{c: c, training: c.AddPriorityClass(t, "training", 500)}
	gpus8 := hpcluster.Guarantee{Flavor: hpcluster.P5, Resource: hpcluster.ResourceGPU, Count: 8}
	s.red = c.AddHyperPodTeam(t, "red", "hyperpod", gpus8)
	s.blue = c.AddHyperPodTeam(t, "blue", "hyperpod", gpus8)
	return s
}

// submit8 submits a one-pod Job asking for 8 GPUs that runs for an hour.
func (s *schedScenario) submit8(t *testing.T, team hpcluster.Team, name string) *batchv1.Job {
	return s.c.SubmitJob(t, team, hpcluster.JobSpec{
		Name: name, Pods: 1, Resource: hpcluster.ResourceGPU, Count: 8,
		PriorityClass: s.training, RunFor: time.Hour,
	})
}

func (s *schedScenario) workload(t *testing.T, job *batchv1.Job) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	hpcluster.WaitFor(t, "a Workload for Job "+job.Name, func() (bool, error) {
		var err error
		wl, err = s.c.WorkloadOf(t.Context(), job)
		return err == nil, err
	})
	return wl
}

// waitWorkload polls job's Workload until ok holds and returns it.
func (s *schedScenario) waitWorkload(t *testing.T, job *batchv1.Job, what string, ok func(*kueue.Workload) bool) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	hpcluster.WaitFor(t, job.Name+": "+what, func() (bool, error) {
		var err error
		wl, err = s.c.WorkloadOf(t.Context(), job)
		return err == nil && ok(wl), err
	})
	return wl
}

func admitted(wl *kueue.Workload) bool { return condTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) }

// waitRunning waits until the Job's pods are Running on p5 nodes (bound by
// kube-scheduler, started by kwok) and returns them.
func (s *schedScenario) waitRunning(t *testing.T, job *batchv1.Job, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	hpcluster.WaitFor(t, fmt.Sprintf("%d running pods of %s", n, job.Name), func() (bool, error) {
		list, err := s.c.Kube.CoreV1().Pods(job.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		return len(pods) == n, nil
	})
	for _, p := range pods {
		node, err := s.c.Kube.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s on node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		if got := node.Labels[hpcluster.LabelInstanceType]; got != hpcluster.P5.Name {
			t.Errorf("pod %s runs on %s (%s), want an %s node: Kueue's flavor must steer it", p.Name, node.Name, got, hpcluster.P5.Name)
		}
	}
	return pods
}

func (s *schedScenario) waitQueueUsage(t *testing.T, team hpcluster.Team, total, borrowed int64) *kueue.ClusterQueue {
	t.Helper()
	var cq *kueue.ClusterQueue
	hpcluster.WaitFor(t, fmt.Sprintf("%s using %d GPUs, %d borrowed", team.ClusterQueue, total, borrowed), func() (bool, error) {
		var err error
		cq, err = s.c.Kueue.KueueV1beta2().ClusterQueues().Get(t.Context(), team.ClusterQueue, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		gotTotal, gotBorrowed := usageOf(cq, hpcluster.P5.Name, hpcluster.ResourceGPU)
		return gotTotal == total && gotBorrowed == borrowed, nil
	})
	return cq
}

// Scenario 1 of issue 34, on the real controllers: red (guarantee 8 GPUs)
// runs 16 while blue (guarantee 8) is idle, Kueue admitting the second 8 by
// borrowing blue's idle quota; blue then submits its 8 and Kueue preempts
// one of red's workloads to reclaim it.
func TestSchedBorrowAndReclaim(t *testing.T) {
	s := newSchedScenario(t)

	// Red's first 8 fit its guarantee; the second 8 only by borrowing.
	redA := s.submit8(t, s.red, "red-a")
	s.waitWorkload(t, redA, "admitted", admitted)
	redB := s.submit8(t, s.red, "red-b")
	s.waitWorkload(t, redB, "admitted", admitted)
	s.waitRunning(t, redA, 1)
	s.waitRunning(t, redB, 1)
	// Kueue's own account: 16 in use, 8 of them borrowed from the cohort.
	s.waitQueueUsage(t, s.red, 16, 8)
	if cq := s.waitQueueUsage(t, s.blue, 0, 0); !condTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
		t.Fatalf("blue's ClusterQueue is not active: %+v", cq.Status.Conditions)
	}

	// Blue claims its guarantee: Kueue must preempt one of red's two.
	blueA := s.submit8(t, s.blue, "blue-a")
	blueWL := s.waitWorkload(t, blueA, "admitted", admitted)
	s.waitRunning(t, blueA, 1)

	var preempted, survivor *kueue.Workload
	var preemptedJob *batchv1.Job
	for _, job := range []*batchv1.Job{redA, redB} {
		wl := s.workload(t, job)
		if condTrue(wl.Status.Conditions, kueue.WorkloadPreempted) {
			if preempted != nil {
				t.Fatalf("Kueue preempted both of red's workloads (%s and %s); reclaiming 8 GPUs needs one", preempted.Name, wl.Name)
			}
			preempted, preemptedJob = wl, job
		} else {
			survivor = wl
		}
	}
	if preempted == nil {
		t.Fatal("blue was admitted but no red workload shows the Preempted condition")
	}
	if survivor == nil || !admitted(survivor) {
		t.Fatalf("red's other workload should still be admitted: %+v", survivor)
	}
	// Preempted by reclamation within the cohort (with fair sharing on,
	// Kueue reports it as fair-sharing preemption), not inside red's queue.
	pc := cond(preempted.Status.Conditions, kueue.WorkloadPreempted)
	if pc.Reason != kueue.InCohortReclamationReason && pc.Reason != kueue.InCohortFairSharingReason {
		t.Errorf("%s preempted for %q (%s); want a cohort reclamation (%s or %s)",
			preempted.Name, pc.Reason, pc.Message, kueue.InCohortReclamationReason, kueue.InCohortFairSharingReason)
	}
	if ec := cond(preempted.Status.Conditions, kueue.WorkloadEvicted); ec == nil || ec.Reason != kueue.WorkloadEvictedByPreemption {
		t.Errorf("%s: Evicted condition %+v, want reason %s", preempted.Name, ec, kueue.WorkloadEvictedByPreemption)
	}
	// Evicted, it waits again: red is back at its guarantee, nothing borrowed.
	s.waitWorkload(t, preemptedJob, "pending after preemption", func(wl *kueue.Workload) bool {
		return !condTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	})
	s.waitQueueUsage(t, s.red, 8, 0)
	s.waitQueueUsage(t, s.blue, 8, 0)

	blueAdmitted := cond(blueWL.Status.Conditions, kueue.WorkloadAdmitted).LastTransitionTime.Time
	t.Logf("Kueue preempted %s (%s: %s); blue waited %s for admission",
		preempted.Name, pc.Reason, pc.Message, blueAdmitted.Sub(blueWL.CreationTimestamp.Time))
}
