package provision

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// hyperPodManager is the field manager the test's stand-in for HyperPod
// task governance applies with.
const hyperPodManager = "hyperpod-task-governance"

var namespacesRes = corev1.SchemeGroupVersion.WithResource("namespaces")

// actAsHyperPod creates what HyperPod task governance creates from a team's
// compute quota: the namespace hyperpod-ns-<team>, labelled as HyperPod
// labels it, and its LocalQueue, both owned by another field manager.
// extra are more namespace labels HyperPod sets.
func actAsHyperPod(ctx context.Context, t *testing.T, dyn dynamic.Interface, team string, extra map[string]string) (ns, lq *unstructured.Unstructured) {
	t.Helper()
	name := HyperPodNamespacePrefix + team
	labels := map[string]any{
		"sagemaker.amazonaws.com/sagemaker-managed-queue": "true",
		"sagemaker.amazonaws.com/quota-allocation-id":     team,
	}
	for k, v := range extra {
		labels[k] = v
	}
	nsObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels},
	}}
	ns, err := dyn.Resource(namespacesRes).Apply(ctx, name, nsObj, metav1.ApplyOptions{FieldManager: hyperPodManager, Force: true})
	if err != nil {
		t.Fatalf("HyperPod's namespace: %v", err)
	}
	lqObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": name + "-localqueue", "namespace": name,
			"labels": map[string]any{"sagemaker.amazonaws.com/sagemaker-managed-queue": "true"}},
		"spec": map[string]any{"clusterQueue": name + "-clusterqueue"},
	}}
	lq, err = dyn.Resource(localQueuesGVR).Namespace(name).Apply(ctx, name+"-localqueue", lqObj, metav1.ApplyOptions{FieldManager: hyperPodManager, Force: true})
	if err != nil {
		t.Fatalf("HyperPod's LocalQueue: %v", err)
	}
	return ns, lq
}

// managers are the field managers of an object's managedFields.
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, m.Manager)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fieldsOf is what manager owns of u, as the API server records it.
func fieldsOf(u *unstructured.Unstructured, manager string) string {
	var b strings.Builder
	for _, m := range u.GetManagedFields() {
		if m.Manager == manager && m.FieldsV1 != nil {
			b.WriteString(m.FieldsV1.GetRawString())
		}
	}
	return b.String()
}

func runSteps(ctx context.Context, t *testing.T, a *Applier, steps []Step) []string {
	t.Helper()
	var out []string
	for _, st := range steps {
		if st.AWS != nil {
			continue
		}
		outcome, detail, err := ApplierSteps{Applier: a}.RunStep(ctx, st)
		if err != nil {
			t.Fatalf("step %s: %v", st.Name(), err)
		}
		out = append(out, st.Name()+": "+string(outcome)+" "+detail)
	}
	return out
}

// TestHyperPodOwnershipIntegration: in HyperPod-managed mode the portal
// waits for HyperPod's namespace, adds only its own labels to it without
// taking HyperPod's fields, never writes HyperPod's LocalQueue, and leaves
// both when the connection is revoked (in either mode).
func TestHyperPodOwnershipIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn := a.Client
	run := runID(t)

	for _, mode := range []RevokeMode{RevokeDelete, RevokeLock} {
		t.Run(string(mode), func(t *testing.T) {
			team := "hp" + run + string(mode[0])
			s := DefaultClusterSettings() // HyperPod-managed: no ClusterQueue of the portal's
			s.OnRevoke = mode
			p := mustPlan(t, 41, itContract(team, HyperPodNamespacePrefix+team), s)
			deleteAfter(t, dyn, p)

			// Before HyperPod has made the namespace, the portal waits
			// (transient) and creates nothing.
			_, err := a.Apply(ctx, p)
			var waiting *waitingError
			if !errors.As(err, &waiting) || IsPermanent(err) {
				t.Fatalf("apply before HyperPod: %v, want a transient wait for the namespace", err)
			}
			if _, err := dyn.Resource(namespacesRes).Get(ctx, p.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the portal created HyperPod's namespace: %v", err)
			}

			hpNS, hpLQ := actAsHyperPod(ctx, t, dyn, team, nil)
			hpNSFields := fieldsOf(hpNS, hyperPodManager)
			runSteps(ctx, t, a, ApplySteps(p))

			ns, err := dyn.Resource(namespacesRes).Get(ctx, p.Namespace, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := fieldsOf(ns, hyperPodManager); got != hpNSFields {
				t.Errorf("HyperPod's fields of the namespace changed:\n got %s\nwant %s", got, hpNSFields)
			}
			if ns.GetLabels()[LabelConnection] != "41" || ns.GetLabels()["sagemaker.amazonaws.com/quota-allocation-id"] != team {
				t.Errorf("namespace labels %v: want the portal's added beside HyperPod's", ns.GetLabels())
			}
			if f := fieldsOf(ns, ManagedBy); !strings.Contains(f, LabelConnection) || strings.Contains(f, "sagemaker.amazonaws.com") {
				t.Errorf("the portal owns %s of the namespace: want its own labels only", f)
			}
			lq, err := dyn.Resource(localQueuesGVR).Namespace(p.Namespace).Get(ctx, hpLQ.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if lq.GetResourceVersion() != hpLQ.GetResourceVersion() || !slices.Equal(managers(lq), []string{hyperPodManager}) {
				t.Errorf("HyperPod's LocalQueue was written: resourceVersion %s -> %s, managers %v", hpLQ.GetResourceVersion(), lq.GetResourceVersion(), managers(lq))
			}
			if items, err := a.Drift(ctx, p); err != nil || len(items) != 0 {
				t.Errorf("drift after provisioning = %v, %v; want none", items, err)
			}

			runSteps(ctx, t, a, RevocationPlan(p, p.OnRevoke))
			ns, err = dyn.Resource(namespacesRes).Get(ctx, p.Namespace, metav1.GetOptions{})
			if err != nil || ns.GetDeletionTimestamp() != nil {
				t.Fatalf("HyperPod's namespace after revocation: %v (deleting %v), want it left", err, ns.GetDeletionTimestamp())
			}
			if got := fieldsOf(ns, hyperPodManager); got != hpNSFields {
				t.Errorf("HyperPod's fields of the namespace changed by revocation")
			}
			lq, err = dyn.Resource(localQueuesGVR).Namespace(p.Namespace).Get(ctx, hpLQ.GetName(), metav1.GetOptions{})
			if err != nil || lq.GetResourceVersion() != hpLQ.GetResourceVersion() {
				t.Errorf("HyperPod's LocalQueue after revocation: %v, %v; want it untouched", lq, err)
			}
			rbs, err := dyn.Resource(roleBindings).Namespace(p.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(rbs.Items) != 0 {
				t.Errorf("role bindings after revocation: %v, %v; want none (access removed)", rbs, err)
			}
		})
	}

	// A label HyperPod manages that the portal would set too is never
	// taken over: the step stops, permanently, and the label stays
	// HyperPod's.
	t.Run("conflict", func(t *testing.T) {
		team := "hp" + run + "c"
		p := mustPlan(t, 42, itContract(team, HyperPodNamespacePrefix+team), DefaultClusterSettings())
		deleteAfter(t, dyn, p)
		actAsHyperPod(ctx, t, dyn, team, map[string]string{LabelManagedBy: "sagemaker"})
		_, err := a.Apply(ctx, Plan{Objects: p.Objects[:1]})
		if !apierrors.IsConflict(err) || !IsPermanent(err) {
			t.Fatalf("apply over HyperPod's managed-by label: %v, want a permanent conflict", err)
		}
		ns, err := dyn.Resource(namespacesRes).Get(ctx, p.Namespace, metav1.GetOptions{})
		if err != nil || ns.GetLabels()[LabelManagedBy] != "sagemaker" {
			t.Errorf("namespace labels %v, %v: want HyperPod's kept", ns.GetLabels(), err)
		}
	})
}
