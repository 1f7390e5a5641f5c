package provision

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PendingWorkload is a Kueue Workload of a team that waits: Kueue has not
// admitted it, and it has not finished. Reason and Message are what Kueue
// wrote on the condition that says why.
type PendingWorkload struct {
	Namespace, Name string
	Queue           string // spec.queueName: the LocalQueue it was submitted to
	// QueueWaiting is how many workloads Kueue counts as pending in that
	// LocalQueue (its status.pendingWorkloads); 0 when the LocalQueue was
	// not found (or Kueue has not counted this one yet).
	QueueWaiting int32
	// Position is the workload's place in its LocalQueue, from 1: Kueue's
	// visibility API's positionInLocalQueue (which counts from 0) + 1. 0
	// when unknown: the API is not served (an aggregated API server Kueue
	// runs beside its controllers, on by default), the portal may not read
	// it, or the workload is not among the first 1,000 it lists.
	Position int32
	// PositionUnknown says why Position is 0 when Kueue's visibility API
	// did not give it (refused, not served, no answer); "" when it
	// answered (a workload beyond the first 1,000 it lists stays 0
	// without a reason) or the workload names no queue.
	PositionUnknown string
	PriorityClass   string // spec.priorityClassRef.name ("" when none)
	Created         time.Time
	// Condition is the condition the reason comes from (QuotaReserved,
	// Admitted or Evicted), empty when Kueue has written none yet.
	Condition, Reason, Message string
	// Since is when that condition last changed (zero without one).
	Since time.Time
}

var (
	workloads   = KueueGroupVersion.WithResource("workloads")
	localQueues = KueueGroupVersion.WithResource("localqueues")
	// Kueue's visibility API: subresource pendingworkloads of a LocalQueue
	// (sigs.k8s.io/kueue@v0.17.0 pkg/visibility/server.go installs
	// visibility.kueue.x-k8s.io v1beta2 and v1beta1;
	// pkg/visibility/storage/pending_workloads_lq.go answers with a
	// PendingWorkloadsSummary, apis/visibility/v1beta2/types.go).
	visibilityLocalQueues = schema.GroupVersionResource{Group: "visibility.kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

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
		waiting, err := r.queueWaiting(ctx, ns)
		if err != nil {
			return nil, err
		}
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
					p.QueueWaiting = waiting[p.Queue]
					out = append(out, p)
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	r.positions(ctx, out)
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

// queueWaiting is Kueue's count of pending workloads per LocalQueue of a
// namespace (status.pendingWorkloads, "the number of Workloads in the
// LocalQueue not yet admitted to a ClusterQueue": sigs.k8s.io/kueue@v0.17.0
// apis/kueue/v1beta2/localqueue_types.go).
func (r *ClusterReader) queueWaiting(ctx context.Context, ns string) (map[string]int32, error) {
	list, err := r.Client.Resource(localQueues).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("provision: list Kueue local queues in %s: %w", ns, err)
	}
	out := make(map[string]int32, len(list.Items))
	for _, u := range list.Items {
		n, _, err := unstructured.NestedInt64(u.Object, "status", "pendingWorkloads")
		if err != nil {
			return nil, fmt.Errorf("provision: Kueue local queue %s/%s: %w", ns, u.GetName(), err)
		}
		out[u.GetName()] = int32(n)
	}
	return out, nil
}

// positions fills in each workload's place in its LocalQueue from Kueue's
// visibility API, one request per LocalQueue. Where the API does not answer
// the positions stay unknown, and each workload of that queue says why
// (PositionUnknown): the page still shows Kueue's reason and count.
func (r *ClusterReader) positions(ctx context.Context, pending []PendingWorkload) {
	type queue struct{ ns, name string }
	type answer struct {
		at  map[string]int32
		why string
	}
	answers := map[queue]answer{}
	for i := range pending {
		p := &pending[i]
		q := queue{p.Namespace, p.Queue}
		if p.Queue == "" {
			continue
		}
		a, ok := answers[q]
		if !ok {
			at, err := r.queuePositions(ctx, q.ns, q.name)
			a = answer{at: at, why: positionUnknown(err, q.ns, q.name)}
			answers[q] = a
		}
		if pos, ok := a.at[p.Name]; ok {
			p.Position = pos + 1
		}
		p.PositionUnknown = a.why
	}
}

// positionUnknown is why the visibility API gave no positions for
// LocalQueue ns/lq, in words a team member can act on ("" for no error).
// The API server's own message is not repeated: it names the portal's
// identity and the cluster's internals.
func positionUnknown(err error, ns, lq string) string {
	switch {
	case err == nil:
		return ""
	case apierrors.IsForbidden(err):
		return "position unknown: the portal may not read Kueue's visibility API (it needs get on localqueues/pendingworkloads in visibility.kueue.x-k8s.io); an admin can grant it"
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("position unknown: Kueue's visibility API knows no LocalQueue %s/%s, or is not served on this cluster", ns, lq)
	}
	reason := string(apierrors.ReasonForError(err))
	if reason == "" || reason == string(metav1.StatusReasonUnknown) {
		reason = "no answer"
	}
	return fmt.Sprintf("position unknown: Kueue's visibility API did not answer (%s)", reason)
}

func (r *ClusterReader) queuePositions(ctx context.Context, ns, lq string) (map[string]int32, error) {
	u, err := r.Client.Resource(visibilityLocalQueues).Namespace(ns).Get(ctx, lq, metav1.GetOptions{}, "pendingworkloads")
	if err != nil {
		return nil, err
	}
	items, _, _ := unstructured.NestedSlice(u.Object, "items")
	out := make(map[string]int32, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "metadata", "name")
		pos, found, err := unstructured.NestedInt64(m, "positionInLocalQueue")
		if name != "" && found && err == nil {
			out[name] = int32(pos)
		}
	}
	return out, nil
}
