package provision

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestSnapshotEdgesIntegration, on the real API server: an object whose
// portal labels someone removed is not in the snapshot's lists, and is
// read on its own and reported as changed (not deleted), then restored; a
// plan holding a kind the API server does not serve fails alone, the other
// plan of the same snapshot is checked and re-applied as usual.
func TestSnapshotEdgesIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx := context.Background()
	run := runID(t)
	s := itSettings(run)
	p1 := mustPlan(t, 9101, itContract("snapa"+run, "hyperpod-ns-snapa"+run), s)
	p2 := mustPlan(t, 9102, itContract("snapb"+run, "hyperpod-ns-snapb"+run), s)
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deleteAfter(t, a.Client, p1, p2)
	for _, p := range []Plan{p1, p2} {
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	bogus := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.test/v1", "kind": "Bogus",
		"metadata": map[string]any{"name": "b", "namespace": p2.Namespace}}}
	p2.Objects = append(p2.Objects, Object{Kind: "Bogus", Namespace: p2.Namespace, Name: "b", Obj: bogus})

	kc := kubernetes.NewForConfigOrDie(cfg)
	lr, err := kc.CoreV1().LimitRanges(p1.Namespace).Get(ctx, NameLimitRange, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(lr.Labels, LabelManagedBy)
	delete(lr.Labels, LabelConnection)
	if _, err := kc.CoreV1().LimitRanges(p1.Namespace).Update(ctx, lr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	res := a.DriftAll(ctx, []Plan{p1, p2})
	if res[0].Err != nil || len(res[0].Items) != 1 || res[0].Items[0].Kind != "LimitRange" || res[0].Items[0].What != "changed" ||
		!strings.Contains(strings.Join(res[0].Items[0].Fields, ","), "metadata.labels") {
		t.Errorf("drift of the plan whose LimitRange lost its labels = %+v, %v; want the LimitRange changed in metadata.labels", res[0].Items, res[0].Err)
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "Bogus") {
		t.Errorf("drift of the plan with an unserved kind = %+v, %v; want its error", res[1].Items, res[1].Err)
	}

	outcomes, err := reapplyAsAJob(ctx, a, p1)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range p1.Objects {
		want := Unchanged
		if o.Kind == "LimitRange" {
			want = Configured
		}
		if outcomes[i] != want {
			t.Errorf("re-apply %s %s = %s; want %s", o.Kind, o.Name, outcomes[i], want)
		}
	}
	if _, err := reapplyAsAJob(ctx, a, p2); err == nil || !strings.Contains(err.Error(), "Bogus") {
		t.Errorf("re-apply of the plan with an unserved kind: %v; want its error", err)
	}
	if r := a.DriftAll(ctx, []Plan{p1})[0]; r.Err != nil || len(r.Items) != 0 {
		t.Errorf("drift after the re-apply: %+v, %v", r.Items, r.Err)
	}
}

// reapplyAsAJob runs p's re-apply steps from one snapshot as a re-apply
// job does (ApplierSteps.ForPlan, then each step, stopping at the first
// failure), and returns each object's outcome.
func reapplyAsAJob(ctx context.Context, a *Applier, p Plan) ([]Outcome, error) {
	steps, err := ApplierSteps{Applier: a}.ForPlan(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []Outcome
	for _, st := range ReapplySteps(p) {
		outcome, _, err := steps.(RevocationApplier).RunStep(ctx, st)
		if err != nil {
			return out, err
		}
		if st.Action == ActionApply {
			out = append(out, outcome)
		}
	}
	return out, nil
}
