package provision

import (
	"context"
	"fmt"
	"sort"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PendingWorkload is a Kueue Workload of a team that waits: Kueue has not
// admitted it, and it has not finished. Reason and Message are what Kueue
// wrote on the condition that says why.
type PendingWorkload struct {
	Namespace, Name string
	Queue           string // spec.queueName: the LocalQueue it was submitted to
	PriorityClass   string // spec.priorityClassRef.name ("" when none)
	Created         time.Time
	// Condition is the condition the reason comes from (QuotaReserved,
	// Admitted or Evicted), empty when Kueue has written none yet.
	Condition, Reason, Message string
	// Since is when that condition last changed (zero without one).
	Since time.Time
}

var workloads = KueueGroupVersion.WithResource("workloads")

// PendingWorkloads lists the Workloads in namespaces that wait for
// admission, oldest first, with the reason Kueue gives. Kueue's Workload
// conditions (sigs.k8s.io/kueue@v0.17.0 apis/kueue/v1beta2/workload_types.go):
// QuotaReserved "means that the Workload has reserved quota a
// ClusterQueue"; Admitted "means that the Workload has reserved quota and
// all the admissionChecks defined in the ClusterQueue are satisfied";
// Finished "means that the workload ... finished running". When the
// scheduler cannot fit a workload it sets QuotaReserved False with reason
// "Pending" and its inadmissible message, e.g. "couldn't assign flavors to
// pod set main: insufficient unused quota for nvidia.com/gpu in flavor
// ml.p5.48xlarge, 8 more needed" (pkg/scheduler/scheduler.go, calling
// workload.UnsetQuotaReservationWithCondition); a missing or stopped queue
// gives reason "Inadmissible" (WorkloadInadmissible). Evicted True (reason
// "Preempted" and others) says why an admitted workload went back to
// waiting, so it is preferred when set.
func (r *ClusterReader) PendingWorkloads(ctx context.Context, namespaces []string) ([]PendingWorkload, error) {
	var out []PendingWorkload
	for _, ns := range namespaces {
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := r.Client.Resource(workloads).Namespace(ns).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("provision: list Kueue workloads in %s: %w", ns, err)
			}
			for _, u := range list.Items {
				var wl kueue.Workload
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wl); err != nil {
					return nil, fmt.Errorf("provision: Kueue workload %s/%s: %w", ns, u.GetName(), err)
				}
				if p, ok := pendingOf(&wl); ok {
					out = append(out, p)
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// pendingOf: a workload waits when it is neither finished nor admitted.
func pendingOf(wl *kueue.Workload) (PendingWorkload, bool) {
	conds := wl.Status.Conditions
	if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadFinished) || apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) {
		return PendingWorkload{}, false
	}
	p := PendingWorkload{Namespace: wl.Namespace, Name: wl.Name, Queue: string(wl.Spec.QueueName), Created: wl.CreationTimestamp.UTC()}
	if ref := wl.Spec.PriorityClassRef; ref != nil {
		p.PriorityClass = ref.Name
	}
	// Evicted True explains a workload sent back to the queue; then
	// QuotaReserved False (the scheduler's reason), then Admitted False.
	var c *metav1.Condition
	if e := apimeta.FindStatusCondition(conds, kueue.WorkloadEvicted); e != nil && e.Status == metav1.ConditionTrue {
		c = e
	} else if q := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); q != nil && q.Status == metav1.ConditionFalse {
		c = q
	} else if a := apimeta.FindStatusCondition(conds, kueue.WorkloadAdmitted); a != nil && a.Status == metav1.ConditionFalse {
		c = a
	}
	if c != nil {
		p.Condition, p.Reason, p.Message, p.Since = c.Type, c.Reason, c.Message, c.LastTransitionTime.UTC()
	}
	return p, true
}
