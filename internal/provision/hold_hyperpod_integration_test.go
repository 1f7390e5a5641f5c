package provision

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestHoldOnHyperPodLocalQueueIntegration: a hold on the LocalQueue that
// HyperPod task governance created. HyperPod's add-on is not open source
// and AWS does not publish its field manager; what is documented is that
// it creates the queue itself ("HyperPod creates and modifies SageMaker
// AI-managed Kubernetes resources such as ... LocalQueues",
// github:aws-samples/awsome-distributed-training
// 1.architectures/7.sagemaker-hyperpod-eks/task-governance/README.md). The
// stand-in creates it with a plain create under its own manager, as a
// controller does: the API server defaults spec.stopPolicy None (Kueue's
// CRD) while decoding, so that manager owns it. Without force the hold
// conflicts; the hold job takes over exactly that field, and the drift
// check reports the queue when HyperPod sets it back.
func TestHoldOnHyperPodLocalQueueIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn := a.Client
	team := "hph" + runID(t)
	p := mustPlan(t, 43, itContract(team, HyperPodNamespacePrefix+team), DefaultClusterSettings())
	deleteAfter(t, dyn, p)

	actAsHyperPod(ctx, t, dyn, team, nil) // the namespace (and an applied queue, replaced below)
	lqName := p.Namespace + "-localqueue"
	lqs := dyn.Resource(localQueuesGVR).Namespace(p.Namespace)
	if err := lqs.Delete(ctx, lqName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := lqs.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": lqName, "namespace": p.Namespace,
			"labels": map[string]any{"sagemaker.amazonaws.com/sagemaker-managed-queue": "true"}},
		"spec": map[string]any{"clusterQueue": p.Namespace + "-clusterqueue"},
	}}, metav1.CreateOptions{FieldManager: hyperPodManager})
	if err != nil {
		t.Fatal(err)
	}
	// The premise: Kueue's default, owned by HyperPod's manager.
	if sp, _, _ := unstructured.NestedString(created.Object, "spec", "stopPolicy"); sp != workflow.StopNone {
		t.Fatalf("created queue's stopPolicy = %q, want the CRD default None", sp)
	}
	if got := StopPolicyManagers(created); !slices.Equal(got, []string{hyperPodManager}) {
		t.Fatalf("managers of spec.stopPolicy after HyperPod's create = %v (fields %s)", got, fieldsOf(created, hyperPodManager))
	}

	steps := HoldSteps(p, workflow.StopHold)
	if len(steps) != 1 || steps[0].Object.Kind != "LocalQueue" || steps[0].Object.Owner != OwnerHyperPod {
		t.Fatalf("hold steps = %+v, want HyperPod's LocalQueue alone", steps)
	}
	// Without force, the apply the hold used to make conflicts.
	ri, err := a.resourceOf(steps[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Apply(ctx, lqName, steps[0].Object.Obj, metav1.ApplyOptions{FieldManager: HoldFieldManager}); !apierrors.IsConflict(err) {
		t.Fatalf("an unforced apply of stopPolicy on HyperPod's queue: %v, want a conflict", err)
	}

	hold := func(policy string) string {
		t.Helper()
		out := runSteps(ctx, t, a, HoldSteps(p, policy))
		live, err := lqs.Get(ctx, lqName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sp, _, _ := unstructured.NestedString(live.Object, "spec", "stopPolicy"); sp != policy {
			t.Errorf("stopPolicy after holding with %s = %q", policy, sp)
		}
		// Exactly one field changed hands: the hold's manager owns
		// spec.stopPolicy alone, HyperPod's keeps the rest.
		if got := fieldsOf(live, HoldFieldManager); got != `{"f:spec":{"f:stopPolicy":{}}}` {
			t.Errorf("the hold's manager owns %s, want spec.stopPolicy alone", got)
		}
		hp := fieldsOf(live, hyperPodManager)
		if strings.Contains(hp, "f:stopPolicy") || !strings.Contains(hp, "f:clusterQueue") || !strings.Contains(hp, "sagemaker-managed-queue") {
			t.Errorf("HyperPod's manager owns %s, want everything but spec.stopPolicy", hp)
		}
		return strings.Join(out, "\n")
	}
	if detail := hold(workflow.StopHold); !strings.Contains(detail, "took the field over from "+hyperPodManager) || !strings.Contains(detail, "the only field of HyperPod's queue") {
		t.Errorf("the step's detail does not say whose field it took: %s", detail)
	}

	// drift is the LocalQueue's drift when the hold says policy (the
	// portal's other objects are not applied here: they show as deleted).
	driftWith := func(policy string) []workflow.DriftItem {
		t.Helper()
		q := p
		q.StopPolicy = policy
		r := a.DriftAll(ctx, []Plan{q})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		var out []workflow.DriftItem
		for _, it := range r.Items {
			if it.Kind == "LocalQueue" {
				out = append(out, it)
			}
		}
		return out
	}
	drift := func() []workflow.DriftItem { return driftWith(workflow.StopHold) }
	if items := drift(); len(items) != 0 {
		t.Errorf("drift while held as the hold says: %+v", items)
	}

	// HyperPod sets it back (an update under its own manager).
	live, err := lqs.Get(ctx, lqName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(live.Object, workflow.StopNone, "spec", "stopPolicy"); err != nil {
		t.Fatal(err)
	}
	if _, err := lqs.Update(ctx, live, metav1.UpdateOptions{FieldManager: hyperPodManager}); err != nil {
		t.Fatal(err)
	}
	items := drift()
	if len(items) != 1 || !slices.Equal(items[0].Fields, []string{"spec.stopPolicy"}) ||
		!strings.Contains(items[0].Detail, "spec.stopPolicy is None, the connection's hold says Hold") || !strings.Contains(items[0].Detail, hyperPodManager) {
		t.Errorf("drift after HyperPod set the hold back = %+v", items)
	}
	// Without a hold to compare (StopPolicy ""), the plan alone sees none.
	if items := driftWith(""); len(items) != 0 {
		t.Errorf("drift of the plan alone: %+v", items)
	}

	// The next hold job takes the field again; a release sets None.
	hold(workflow.StopHoldAndDrain)
	hold(workflow.StopNone)
}
