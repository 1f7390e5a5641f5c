package provision

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestCovers(t *testing.T) {
	want := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": "p", "namespace": "ns",
				"labels":      map[string]any{LabelManagedBy: ManagedBy},
				"annotations": map[string]any{AnnotationContractHash: "abc"}},
			"spec": map[string]any{"podSelector": map[string]any{},
				"egress": []any{map[string]any{"ports": []any{map[string]any{"port": int64(53)}}}}},
		}}
	}
	// The live copy: what the API server added (defaults, bookkeeping,
	// another manager's label) is not a difference; a number decoded as a
	// float is the same number.
	live := want()
	live.SetResourceVersion("7")
	live.SetUID("u")
	live.SetLabels(map[string]string{LabelManagedBy: ManagedBy, "someone": "else"})
	ports := []any{map[string]any{"port": float64(53), "protocol": "TCP"}}
	_ = unstructured.SetNestedSlice(live.Object, []any{map[string]any{"ports": ports}}, "spec", "egress")
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: ManagedBy, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "networking.k8s.io/v1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}},"f:annotations":{".":{},"f:portal.hyperpod.io/contract-hash":{}}},"f:spec":{"f:egress":{},"f:podSelector":{}}}`)}})
	if got := Covers(live, want(), ManagedBy); len(got) != 0 {
		t.Fatalf("an unchanged object differs: %v", got)
	}

	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		want   []string
	}{
		{"spec edited, annotation untouched", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ports": []any{map[string]any{"port": int64(54)}}}}, "spec", "egress")
		}, []string{"spec.egress.ports"}},
		{"a list element added", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ports": ports}, map[string]any{}}, "spec", "egress")
		}, []string{"spec.egress"}},
		{"a label removed", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"someone": "else"})
		}, []string{"metadata.labels.app.kubernetes.io/managed-by"}},
		{"the annotation edited", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{AnnotationContractHash: "forged"})
		}, []string{"metadata.annotations.portal.hyperpod.io/contract-hash"}},
		{"the spec gone", func(u *unstructured.Unstructured) { delete(u.Object, "spec") }, []string{"spec"}},
		{"a field the portal owns and the plan no longer sets", func(u *unstructured.Unstructured) {
			mf := u.GetManagedFields()
			mf[0].FieldsV1 = metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}},"f:annotations":{".":{},"f:portal.hyperpod.io/contract-hash":{}}},"f:spec":{"f:egress":{},"f:ingress":{},"f:podSelector":{}}}`)
			u.SetManagedFields(mf)
		}, []string{"spec.ingress"}},
		// Extra keys inside an atomic field (NetworkPolicy's egress and
		// its peers are +listType=atomic, a LabelSelector is
		// +structType=atomic): an apply replaces the whole field, so the
		// edit is a difference although every planned value is still
		// there. The API server moves the field's ownership to the editor
		// (kubectl-edit), and that is what Covers sees.
		{"an extra key inside an atomic list, set by another manager", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"ports": ports,
				"to": []any{map[string]any{"namespaceSelector": map[string]any{}}}}}, "spec", "egress")
			byEditor(u, `{"f:spec":{"f:egress":{}}}`, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}},"f:annotations":{".":{},"f:portal.hyperpod.io/contract-hash":{}}},"f:spec":{"f:podSelector":{}}}`)
		}, []string{"spec.egress"}},
		{"an extra key inside an atomic struct, set by another manager", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"nobody": "matches"}, "spec", "podSelector", "matchLabels")
			byEditor(u, `{"f:spec":{"f:podSelector":{}}}`, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}},"f:annotations":{".":{},"f:portal.hyperpod.io/contract-hash":{}}},"f:spec":{"f:egress":{}}}`)
		}, []string{"spec.podSelector"}},
		{"no managedFields entry of the portal's", func(u *unstructured.Unstructured) {
			u.SetManagedFields(nil)
		}, []string{"metadata.managedFields"}},
		{"the portal's entry is of another apiVersion", func(u *unstructured.Unstructured) {
			mf := u.GetManagedFields()
			mf[0].APIVersion = "networking.k8s.io/v1beta1"
			u.SetManagedFields(mf)
		}, []string{"metadata.managedFields"}},
		{"the portal's entry is of a subresource", func(u *unstructured.Unstructured) {
			mf := u.GetManagedFields()
			mf[0].Subresource = "status"
			u.SetManagedFields(mf)
		}, []string{"metadata.managedFields"}},
		{"the portal's entry is an update, not an apply", func(u *unstructured.Unstructured) {
			mf := u.GetManagedFields()
			mf[0].Operation = metav1.ManagedFieldsOperationUpdate
			u.SetManagedFields(mf)
		}, []string{"metadata.managedFields"}},
		{"managedFields not as the API server writes them", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "f:spec", "metadata", "managedFields")
		}, []string{"metadata.managedFields"}},
		{"a field set that is not an object", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": ManagedBy, "operation": "Apply",
				"apiVersion": "networking.k8s.io/v1", "fieldsV1": "f:spec"}}, "metadata", "managedFields")
		}, []string{"metadata.managedFields"}},
		{"a label the plan sets is owned by another manager", func(u *unstructured.Unstructured) {
			byEditor(u, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}}}`, `{"f:metadata":{"f:annotations":{".":{},"f:portal.hyperpod.io/contract-hash":{}}},"f:spec":{"f:egress":{},"f:podSelector":{}}}`)
		}, []string{"metadata.labels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := live.DeepCopy()
			tc.change(l)
			if got := Covers(l, want(), ManagedBy); !slices.Equal(got, tc.want) {
				t.Errorf("Covers = %v, want %v", got, tc.want)
			}
		})
	}
	// Another manager's fields are not the portal's to remove.
	other := live.DeepCopy()
	other.SetManagedFields(append(other.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: "networking.k8s.io/v1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:ingress":{}}}`)}))
	if got := Covers(other, want(), ManagedBy); len(got) != 0 {
		t.Errorf("another manager's field counts as the portal's: %v", got)
	}
}

// byEditor gives u the managedFields of a hand edit: kubectl-edit (an
// Update) owns editor, the portal's Apply entry keeps portal.
func byEditor(u *unstructured.Unstructured, editor, portal string) {
	mf := u.GetManagedFields()
	mf[0].FieldsV1 = metav1.NewFieldsV1(portal)
	mf = append(mf, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "networking.k8s.io/v1", FieldsV1: metav1.NewFieldsV1(editor)})
	u.SetManagedFields(mf)
}

func TestDriftCheckerBatches(t *testing.T) {
	var batches [][]int64
	saved := map[int64]string{}
	d := &DriftChecker{
		List: func(context.Context) ([]ConnVersion, error) {
			return []ConnVersion{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}, nil
		},
		Plans: func(_ context.Context, id int64, v int) (Plan, error) {
			if id == 4 {
				return Plan{}, Permanent(errors.New("the plan cannot be built"))
			}
			return Plan{ConnectionID: id, ContractVersion: v}, nil
		},
		CheckAll: func(_ context.Context, plans []Plan, _ *ListCache) []DriftResult {
			var ids []int64
			out := make([]DriftResult, len(plans))
			for i, p := range plans {
				ids = append(ids, p.ConnectionID)
				if p.ConnectionID == 2 {
					out[i].Items = []workflow.DriftItem{{Kind: "ResourceQuota", What: "changed"}}
				}
				if p.ConnectionID == 5 {
					out[i].Err = context.DeadlineExceeded
				}
			}
			batches = append(batches, ids)
			return out
		},
		Save: func(_ context.Context, id int64, _ workflow.DriftBasis, items []workflow.DriftItem, checkErr string, _ time.Time) error {
			saved[id] = checkErr
			if len(items) > 0 {
				saved[id] = "drift"
			}
			return nil
		},
		Batch: 2,
	}
	n, err := d.RunOnce(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1 drifted", n, err)
	}
	if want := [][]int64{{1, 2}, {3}, {5}}; !slices.EqualFunc(batches, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", batches, want)
	}
	if len(saved) != 5 || saved[1] != "" || saved[2] != "drift" || saved[3] != "" || saved[4] == "" || saved[5] == "" {
		t.Errorf("saved = %v: every connection once, a failure never as no drift", saved)
	}
}
