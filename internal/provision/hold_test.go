package provision

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestHoldSteps: a hold sets the stopPolicy of the plan's ClusterQueue
// (when the portal manages it) and LocalQueue, as objects holding nothing
// else (the step forces, so it takes that one field even of the LocalQueue
// HyperPod owns: TestHoldOnHyperPodLocalQueueIntegration).
// The plan itself never sets stopPolicy, so that re-applying it (under
// ManagedBy, with force) neither resets nor takes over a hold's field.
func TestHoldSteps(t *testing.T) {
	c := workflow.ExampleContract()
	for _, tc := range []struct {
		name   string
		s      ClusterSettings
		want   string
		owners []Owner
	}{
		{"portal manages the ClusterQueue", managedSettings(), "stopPolicy Hold on ClusterQueue red-cq|stopPolicy Hold on LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue",
			[]Owner{OwnerPortal, OwnerPortal}},
		{"HyperPod task governance", DefaultClusterSettings(), "stopPolicy Hold on LocalQueue hyperpod-ns-red/hyperpod-ns-red-localqueue",
			[]Owner{OwnerHyperPod}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := BuildPlan(1, 1, c.Hash(), c, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range p.Objects {
				if o.Kind != "LocalQueue" && o.Kind != "ClusterQueue" {
					continue
				}
				if _, found, _ := unstructured.NestedFieldNoCopy(o.Obj.Object, "spec", "stopPolicy"); found {
					t.Errorf("the plan's %s sets spec.stopPolicy: a re-apply would take the hold's field", o.Kind)
				}
			}
			steps := HoldSteps(p, workflow.StopHold)
			var names []string
			for i, st := range steps {
				names = append(names, st.Name())
				if st.Action != ActionStopPolicy || st.Object.Owner != tc.owners[i] {
					t.Errorf("step %d = %s, owner %q; want %s, %q", i, st.Action, st.Object.Owner, ActionStopPolicy, tc.owners[i])
				}
				spec, _, _ := unstructured.NestedMap(st.Object.Obj.Object, "spec")
				if len(spec) != 1 || spec["stopPolicy"] != "Hold" || len(st.Object.Obj.GetLabels()) != 0 {
					t.Errorf("step %d applies more than spec.stopPolicy: %v", i, st.Object.Obj.Object)
				}
			}
			if got := strings.Join(names, "|"); !strings.Contains(got, "red") || got != strings.ReplaceAll(tc.want, "red-cq", clusterQueueName(p)) {
				t.Errorf("steps = %s, want %s", got, tc.want)
			}
			if StepsHash(steps) == StepsHash(HoldSteps(p, workflow.StopNone)) {
				t.Error("a hold and a release have the same steps hash")
			}
		})
	}
	if HoldFieldManager == ManagedBy {
		t.Error("the hold's field manager is the plan's: applying stopPolicy alone would give up every other field")
	}
}

func clusterQueueName(p Plan) string {
	for _, o := range p.Objects {
		if o.Kind == "ClusterQueue" {
			return o.Name
		}
	}
	return ""
}
