package provision_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision"
)

// Pending workloads are read from Kueue Workloads on the real API server
// (the test bed's Kueue CRDs, status written through the status
// subresource as Kueue's scheduler would): a workload Kueue could not fit
// (QuotaReserved False, reason Pending), one evicted by preemption, and one
// Kueue has not looked at yet are pending, with their reasons; admitted and
// finished ones are not, nor are other namespaces' workloads.
func TestPendingWorkloadsIntegration(t *testing.T) {
	r, dyn := clusterReader(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id := wintRandom(t)
	ns, other := "wl-"+id, "wl-other-"+id
	nsRes := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, n := range []string{ns, other} {
		if _, err := nsRes.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": n},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := nsRes.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", n, err)
			}
		})
	}
	wls := dyn.Resource(provision.KueueGroupVersion.WithResource("workloads"))
	now := metav1.Now().Rfc3339Copy()
	mk := func(namespace, name string, conds ...map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": provision.KueueGroupVersion.String(), "kind": "Workload",
			"metadata": map[string]any{"name": name, "namespace": namespace},
			"spec": map[string]any{
				"queueName":        "hyperpod-ns-red-localqueue",
				"priorityClassRef": map[string]any{"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "training-priority"},
				"priority":         int64(100),
				"podSets": []any{map[string]any{
					"name": "main", "count": int64(1),
					"template": map[string]any{"spec": map[string]any{
						"restartPolicy": "Never",
						"containers":    []any{map[string]any{"name": "main", "image": "example.test/train:1"}},
					}},
				}},
			},
		}}
		created, err := wls.Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create workload %s/%s: %v", namespace, name, err)
		}
		if len(conds) == 0 {
			return
		}
		var cs []any
		for _, c := range conds {
			c["lastTransitionTime"] = now.Format(time.RFC3339)
			cs = append(cs, c)
		}
		if err := unstructured.SetNestedSlice(created.Object, cs, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		if _, err := wls.Namespace(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("status of %s/%s: %v", namespace, name, err)
		}
	}
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
	}
	const noFit = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge, 8 more needed"
	mk(ns, "a-no-quota", cond("QuotaReserved", "False", "Pending", noFit))
	mk(ns, "b-preempted",
		cond("QuotaReserved", "False", "Pending", "waiting"),
		cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"))
	mk(ns, "c-new")
	mk(ns, "d-admitted", cond("QuotaReserved", "True", "QuotaReserved", "ok"), cond("Admitted", "True", "Admitted", "ok"))
	mk(ns, "e-finished", cond("Finished", "True", "Succeeded", "done"))
	mk(other, "f-elsewhere", cond("QuotaReserved", "False", "Pending", noFit))

	got, err := r.PendingWorkloads(ctx, []string{ns})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]string{
		"a-no-quota":  {"QuotaReserved", "Pending", noFit},
		"b-preempted": {"Evicted", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"},
		"c-new":       {"", "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("pending = %+v, want %d workloads", got, len(want))
	}
	for _, p := range got {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("%s/%s is listed as pending", p.Namespace, p.Name)
			continue
		}
		if p.Condition != w[0] || p.Reason != w[1] || p.Message != w[2] {
			t.Errorf("%s: %s %s %q, want %v", p.Name, p.Condition, p.Reason, p.Message, w)
		}
		if p.Namespace != ns || p.Queue != "hyperpod-ns-red-localqueue" || p.PriorityClass != "training-priority" || p.Created.IsZero() {
			t.Errorf("%s: %+v", p.Name, p)
		}
	}
}
