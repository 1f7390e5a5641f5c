package provision

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// The plan never sets stopPolicy (BuildPlan leaves it nil, so the defaulted
// None is owned by nobody), so a later re-apply or amendment under ManagedBy
// neither changes nor takes the field: a hold survives them, and drift
// detection (a dry-run apply of the plan) sees no difference. On the
// portal's own queues the step forces (its word wins over a hand edit of
// the field); on the LocalQueue HyperPod task governance owns, it does not
// force: the portal otherwise never writes that queue, and should HyperPod
// manage stopPolicy the conflict stops the job instead of taking the field.

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
// HoldFieldManager: forced on the portal's queues, not on HyperPod's. The
// queue must exist: a hold creates nothing.
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
	out, err := ri.Apply(ctx, o.Name, o.Obj, metav1.ApplyOptions{FieldManager: HoldFieldManager, Force: o.Owner == OwnerPortal})
	if apierrors.IsConflict(err) {
		return Failed, "", permanent(fmt.Errorf("%w: another manager owns spec.stopPolicy of %s %s; the portal does not take it over", err, o.Kind, o.Ref()))
	}
	if err != nil {
		return Failed, "", err
	}
	policy, _, _ := unstructured.NestedString(out.Object, "spec", "stopPolicy")
	detail := "spec.stopPolicy " + policy + ", resourceVersion " + out.GetResourceVersion()
	if out.GetResourceVersion() == live.GetResourceVersion() {
		return Unchanged, detail, nil
	}
	return Configured, detail, nil
}
