package provision

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestDriftIntegration: on the real API server, a freshly applied plan has
// no drift; a quota changed by hand, a NetworkPolicy deleted by hand and a
// RoleBinding added by hand are each reported; re-applying the plan and
// pruning extra bindings fixes all of it.
func TestDriftIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx := context.Background()
	run := runID(t)
	team := "drift" + run
	c := itContract(team, "hyperpod-ns-"+team)
	s := itSettings(run)
	p := mustPlan(t, 9001, c, s)
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deleteAfter(t, a.Client, p)
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if d, err := a.Drift(ctx, p); err != nil || len(d) != 0 {
		t.Fatalf("fresh plan: drift %v, %v", d, err)
	}

	kc := kubernetes.NewForConfigOrDie(cfg)
	ns := p.Namespace
	q, err := kc.CoreV1().ResourceQuotas(ns).Get(ctx, NameResourceQuota, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")]
	gpu.Add(gpu) // double it by hand
	q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")] = gpu
	if _, err := kc.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.NetworkingV1().NetworkPolicies(ns).Delete(ctx, NamePolicyDNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	extra := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sneaky-admin", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "team-blue-submitters"}},
	}
	if _, err := kc.RbacV1().RoleBindings(ns).Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	d, err := a.Drift(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workflow.DriftItem{}
	for _, it := range d {
		got[it.Kind+" "+it.What] = it
	}
	if it, ok := got["ResourceQuota changed"]; !ok || !strings.Contains(strings.Join(it.Fields, ","), "spec.hard") {
		t.Errorf("the hand-edited quota is not reported: %v", d)
	}
	if _, ok := got["NetworkPolicy deleted"]; !ok {
		t.Errorf("the deleted NetworkPolicy is not reported: %v", d)
	}
	if it, ok := got["RoleBinding extra"]; !ok || !strings.Contains(it.Detail, "admin") || !strings.Contains(it.Detail, "team-blue-submitters") {
		t.Errorf("the extra RoleBinding is not reported with what it grants: %v", d)
	}
	if len(d) != 3 {
		t.Errorf("drift = %v, want exactly 3 items", d)
	}

	// Re-apply and prune: no drift left.
	if _, err := a.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	pruned, err := a.PruneExtraBindings(ctx, p)
	if err != nil || len(pruned) != 1 || pruned[0] != ns+"/sneaky-admin" {
		t.Errorf("pruned %v, %v", pruned, err)
	}
	if d, err := a.Drift(ctx, p); err != nil || len(d) != 0 {
		t.Errorf("after re-apply: drift %v, %v", d, err)
	}
}

func TestDifferences(t *testing.T) {
	live := map[string]any{"metadata": map[string]any{"name": "q", "resourceVersion": "7", "managedFields": []any{1}},
		"spec": map[string]any{"hard": map[string]any{"cpu": "4", "pods": "10"}}, "status": map[string]any{"used": "x"}}
	want := map[string]any{"metadata": map[string]any{"name": "q", "resourceVersion": "8"},
		"spec": map[string]any{"hard": map[string]any{"cpu": "8", "pods": "10"}}}
	if got := differences(live, want); strings.Join(got, ",") != "spec.hard.cpu" {
		t.Errorf("differences = %v, want [spec.hard.cpu]", got)
	}
	if got := differences(live, live); len(got) != 0 {
		t.Errorf("an object differs from itself: %v", got)
	}
}
