package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Holds (workflow/hold.go): a hold job sets spec.stopPolicy on the team's
// LocalQueue, and on its ClusterQueue when the portal manages it, to what
// the connection's hold says (None, Hold, HoldAndDrain).
//
// Kueue (sigs.k8s.io/kueue v0.17.0, apis/kueue/v1beta2/localqueue_types.go
// LocalQueueSpec.StopPolicy and clusterqueue_types.go
// ClusterQueueSpec.StopPolicy; the CRDs config/components/crd/bases/
// kueue.x-k8s.io_localqueues.yaml and _clusterqueues.yaml, which the test
// bed installs, enum None, Hold, HoldAndDrain, default None): "if set to a
// value different from None, the LocalQueue is considered Inactive, no new
// reservation being made. ... None - Workloads are admitted; HoldAndDrain -
// Admitted workloads are evicted and Reserving workloads will cancel the
// reservation; Hold - Admitted workloads will run to completion and
// Reserving workloads will cancel the reservation."
//
// Field ownership. The step server-side applies an object holding only
// spec.stopPolicy, under its own field manager, HoldFieldManager. Applied
// under the plan's manager (ManagedBy), that partial object would give up
// every other field the plan sets, and the API server would remove them.
// The plan never sets stopPolicy (BuildPlan leaves it nil), so a later
// re-apply or amendment under ManagedBy neither changes nor takes the
// field: a hold survives them, and the plan's own comparison sees no
// difference (the drift check compares stopPolicy with the hold
// separately: StopPolicyDrift).
//
// The step always forces, and so takes over exactly that one field: the
// applied object sets nothing else, and forcing moves only the conflicting
// fields of the applied configuration to the applier ("the field's value
// will be set to the value in the configuration, and the ownership will be
// transferred to the applier", https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts).
// It must: Kueue's CRDs default stopPolicy to None (kubebuilder:default
// "None" on LocalQueueSpec.StopPolicy and ClusterQueueSpec.StopPolicy,
// github:kubernetes-sigs/kueue apis/kueue/v1beta2/localqueue_types.go and
// config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml
// "default: None", @ff69552e79ad21652c36caa97038382e55625cf7), the API
// server applies a CRD's defaults when it decodes a request, and a
// manager that created the queue with a plain create owns every field of
// the object it stored, the defaulted None included. HyperPod task
// governance creates the team's LocalQueue itself ("When installed,
// HyperPod creates and modifies SageMaker AI-managed Kubernetes resources
// such as ... LocalQueues", github:aws-samples/awsome-distributed-training
// 1.architectures/7.sagemaker-hyperpod-eks/task-governance/README.md), so
// without force the hold on HyperPod's queue conflicts with HyperPod's
// manager. The step's detail names the managers it took the field from;
// the connection page says the hold takes that field of HyperPod's queue.
// Should HyperPod (or anyone) set it back, the drift check reports the
// queue (StopPolicyDrift) and a hold job applies it again.

// HoldFieldManager is the field manager of a hold's stopPolicy.
const HoldFieldManager = ManagedBy + "-hold"

// ActionStopPolicy server-side applies an object's spec.stopPolicy alone,
// under HoldFieldManager.
const ActionStopPolicy StepAction = "stop-policy"

// HoldSteps are the steps of a hold job on plan p: one per queue of the
// plan (its ClusterQueue when the portal manages it, then the LocalQueue),
// each setting spec.stopPolicy to policy.
func HoldSteps(p Plan, policy string) []Step {
	var steps []Step
	for _, kind := range []string{"ClusterQueue", "LocalQueue"} {
		for _, o := range p.Objects {
			if o.Kind != kind || o.Obj == nil {
				continue
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": o.Obj.GetAPIVersion(),
				"kind":       o.Kind,
				"metadata":   map[string]any{"name": o.Name},
				"spec":       map[string]any{"stopPolicy": policy},
			}}
			if o.Namespace != "" {
				u.SetNamespace(o.Namespace)
			}
			owner := OwnerPortal
			if o.Owner != OwnerPortal {
				owner = OwnerHyperPod
			}
			steps = append(steps, Step{Action: ActionStopPolicy,
				Object: Object{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Owner: owner, Obj: u},
				Detail: fmt.Sprintf("spec.stopPolicy %s on %s %s", policy, o.Kind, o.Ref())})
		}
	}
	return steps
}

// StopPolicy applies s.Object (spec.stopPolicy alone) under
// HoldFieldManager, forced (see above). The queue must exist: a hold
// creates nothing.
func (a *Applier) StopPolicy(ctx context.Context, o Object) (Outcome, string, error) {
	ri, err := a.resourceOf(o)
	if err != nil {
		return Failed, "", err
	}
	live, err := ri.Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Failed, "", fmt.Errorf("provision: %s %s does not exist: the hold sets its stopPolicy and creates nothing (re-apply the plan first)", o.Kind, o.Ref())
	}
	if err != nil {
		return Failed, "", err
	}
	out, err := ri.Apply(ctx, o.Name, o.Obj, metav1.ApplyOptions{FieldManager: HoldFieldManager, Force: true})
	if err != nil {
		return Failed, "", err
	}
	policy, _, _ := unstructured.NestedString(out.Object, "spec", "stopPolicy")
	detail := "spec.stopPolicy " + policy + ", resourceVersion " + out.GetResourceVersion()
	if from := StopPolicyManagers(live); len(from) > 0 {
		detail += "; took the field over from " + strings.Join(from, ", ")
		if o.Owner != OwnerPortal {
			detail += " (the only field of HyperPod's queue the portal writes)"
		}
	}
	if out.GetResourceVersion() == live.GetResourceVersion() {
		return Unchanged, detail, nil
	}
	return Configured, detail, nil
}

// StopPolicyManagers are the field managers other than HoldFieldManager
// that own spec.stopPolicy of live, sorted.
func StopPolicyManagers(live *unstructured.Unstructured) []string {
	var out []string
	for _, m := range live.GetManagedFields() {
		if m.Manager == HoldFieldManager || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if spec, ok := fields["f:spec"].(map[string]any); ok {
			if _, ok := spec["f:stopPolicy"]; ok && !slices.Contains(out, m.Manager) {
				out = append(out, m.Manager)
			}
		}
	}
	slices.Sort(out)
	return out
}

// IsQueue reports whether o is a Kueue queue a hold sets the stopPolicy of.
func IsQueue(o Object) bool { return o.Kind == "LocalQueue" || o.Kind == "ClusterQueue" }

// StopPolicyDrift is the drift of a queue whose live spec.stopPolicy is
// not want, what the connection's hold says (workflow.Hold.StopPolicy);
// nil when it is. An absent field counts as Kueue's default None.
func StopPolicyDrift(o Object, live *unstructured.Unstructured, want string) *workflow.DriftItem {
	got, _, _ := unstructured.NestedString(live.Object, "spec", "stopPolicy")
	if got == "" {
		got = workflow.StopNone
	}
	if got == want {
		return nil
	}
	detail := fmt.Sprintf("spec.stopPolicy is %s, the connection's hold says %s", got, want)
	if from := StopPolicyManagers(live); len(from) > 0 {
		detail += " (set by " + strings.Join(from, ", ") + ")"
	}
	return &workflow.DriftItem{Kind: o.Kind, Ref: o.Ref(), What: "changed", Fields: []string{"spec.stopPolicy"},
		Detail: detail + "; Try again on the hold panel applies the hold again"}
}
