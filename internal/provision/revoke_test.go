package provision

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func stepNames(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name()
	}
	return out
}

func TestRevocationPlanLock(t *testing.T) {
	c := workflow.ExampleContract()
	p, err := BuildPlan(7, 3, c.Hash(), c, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	if p.OnRevoke != RevokeLock {
		t.Fatalf("default OnRevoke %q, want lock", p.OnRevoke)
	}
	steps := RevocationPlan(p, p.OnRevoke)
	ns := "hyperpod-ns-red"
	want := []string{
		"delete ClusterRoleBinding hyperpod-portal-hyperpod-ns-red-queue-reader",
		"delete RoleBinding " + ns + "/team-submitters",
		"delete RoleBinding " + ns + "/team-viewers",
		"delete every RoleBinding left in " + ns,
		"delete ClusterRole hyperpod-portal-hyperpod-ns-red-queue-reader",
		"delete Role " + ns + "/team-submitter",
		"delete Role " + ns + "/team-viewer",
		"delete ServiceAccount " + ns + "/red-workloads",
		// HyperPod's queue is left to HyperPod; the portal locks its
		// namespace with its own quota and label only.
		"leave LocalQueue " + ns + "/" + ns + "-localqueue to HyperPod",
		"lock ResourceQuota " + ns + "/revoked",
		"delete ResourceQuota " + ns + "/team-quota",
		"delete LimitRange " + ns + "/team-container-defaults",
		"delete NetworkPolicy " + ns + "/allow-observability-scrapers",
		"delete NetworkPolicy " + ns + "/allow-hyperpod-training-operator",
		"delete NetworkPolicy " + ns + "/allow-eks-pod-identity-agent",
		"delete NetworkPolicy " + ns + "/allow-dns",
		"delete NetworkPolicy " + ns + "/allow-same-namespace",
		// The namespace is labelled revoked, which the shared bindings
		// leave out, before the team's admission parameters go: matched
		// without them, every job in it would be refused.
		"lock Namespace " + ns,
		"delete ConfigMap " + ns + "/hyperpod-portal-contract",
	}
	if got := stepNames(steps); !slices.Equal(got, want) {
		t.Errorf("lock revocation:\n got %q\nwant %q", got, want)
	}

	quota := steps[9].Object
	hard, _, _ := unstructured.NestedStringMap(quota.Obj.Object, "spec", "hard")
	for _, r := range []string{"pods", "requests.nvidia.com/gpu", "requests.cpu", "requests.memory"} {
		if hard[r] != "0" {
			t.Errorf("revoked quota %s = %q, want 0 (hard %v)", r, hard[r], hard)
		}
	}
	for _, o := range []Object{quota, steps[len(steps)-2].Object} {
		l := o.Obj.GetLabels()
		if l[LabelRevoked] != "true" || l[LabelConnection] != "7" || l[LabelManagedBy] != ManagedBy {
			t.Errorf("%s %s labels %v, want revoked, connection 7, managed by the portal", o.Kind, o.Ref(), l)
		}
	}
	// Pure: the plan's own objects are untouched.
	for _, o := range p.Objects {
		if _, ok := o.Obj.GetLabels()[LabelRevoked]; ok {
			t.Errorf("RevocationPlan changed the plan's %s %s", o.Kind, o.Ref())
		}
	}
	if StepsHash(steps) != StepsHash(RevocationPlan(p, RevokeLock)) {
		t.Error("the same plan gave two revocation hashes")
	}
}

func TestRevocationPlanDelete(t *testing.T) {
	s := DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = true
	s.Cohort = "all"
	s.OnRevoke = RevokeDelete
	c := workflow.ExampleContract()
	p, err := BuildPlan(7, 3, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	steps := RevocationPlan(p, p.OnRevoke)
	names := stepNames(steps)

	// Every object of the team is removed exactly once; shared ones never.
	for _, o := range p.Objects {
		n := 0
		for _, st := range steps {
			if st.Object.Kind == o.Kind && st.Object.Name == o.Name && st.Action == ActionDelete {
				n++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[o.Shared]; n != want {
			t.Errorf("%s %s (shared %v) deleted %d times, want %d", o.Kind, o.Ref(), o.Shared, n, want)
		}
	}
	// The one lock of delete mode is the namespace's revoked label, just
	// before the admission parameters go (out of the shared bindings, its
	// jobs are not refused while the namespace terminates).
	var ordered []Step
	for i, st := range steps {
		if st.Object.Shared || (st.Action == ActionLock && st.Object.Kind != "Namespace") {
			t.Errorf("delete mode runs %s", st.Name())
		}
		if st.Action == ActionLock {
			if i+1 >= len(steps) || names[i+1] != "delete ConfigMap hyperpod-ns-red/hyperpod-portal-contract" {
				t.Errorf("step %d %s: want it just before the admission parameters are deleted", i, names[i])
			}
			if st.Object.Obj.GetLabels()[LabelRevoked] != "true" {
				t.Errorf("%s: labels %v, want %s=true", names[i], st.Object.Obj.GetLabels(), LabelRevoked)
			}
			continue
		}
		ordered = append(ordered, st)
	}
	if n := strings.Count(strings.Join(names, "\n"), "lock Namespace "); n != 1 {
		t.Errorf("delete mode labels the namespace %d times, want once: %q", n, names)
	}
	// Safe order: bindings, roles and the ServiceAccount, queues, quota
	// and defaults, network policies, the admission rules' parameters, the
	// namespace last.
	rank := map[string]int{"ClusterRoleBinding": 0, "RoleBinding": 0, "ClusterRole": 1, "Role": 1, "ServiceAccount": 1, "LocalQueue": 2, "ClusterQueue": 2,
		"ResourceQuota": 3, "LimitRange": 3, "NetworkPolicy": 4, "ConfigMap": 5, "Namespace": 6}
	for i := 1; i < len(ordered); i++ {
		if rank[ordered[i].Object.Kind] < rank[ordered[i-1].Object.Kind] {
			t.Errorf("%s comes after %s", ordered[i].Name(), ordered[i-1].Name())
		}
	}
	if got := names[len(names)-1]; got != "delete Namespace hyperpod-ns-red" {
		t.Errorf("last step %q, want the namespace deleted", got)
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "delete ClusterQueue ") }) {
		t.Errorf("steps %v: the portal's ClusterQueue is not deleted", names)
	}
}

func TestOnRevokeSetting(t *testing.T) {
	s := DefaultClusterSettings()
	s.OnRevoke = "shred"
	c := workflow.ExampleContract()
	if _, err := BuildPlan(1, 1, c.Hash(), c, s); err == nil || !strings.Contains(err.Error(), "OnRevoke") {
		t.Errorf("BuildPlan with OnRevoke %q = %v, want a settings error", s.OnRevoke, err)
	}
	// The mode changes nothing that is applied.
	a, _ := BuildPlan(1, 1, c.Hash(), c, DefaultClusterSettings())
	s.OnRevoke = RevokeDelete
	b, _ := BuildPlan(1, 1, c.Hash(), c, s)
	if a.Hash() != b.Hash() {
		t.Error("OnRevoke changed the plan's hash")
	}
}
