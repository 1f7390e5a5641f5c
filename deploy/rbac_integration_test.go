package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestClusterRoleProvisionsOnTheTestBed: with nothing but the chart's
// ClusterRole, bound to a ServiceAccount the test acts as, the provisioner
// applies a plan on the test bed's real API server (its escalation checks
// included: the plan's Roles and ClusterRole, and the bindings to them, are
// created only because the ClusterRole holds what they grant), re-applies
// it, checks it for drift, holds and releases its queues, re-applies with
// pruning, reads the cluster as the readiness checks do, and revokes it.
// TestClusterRoleIsWhatThePortalUses proves no permission is extra; this
// proves none is missing where the API server decides.
func TestClusterRoleProvisionsOnTheTestBed(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	run := hex.EncodeToString(b)

	// The release: its namespace, ServiceAccount, the chart's ClusterRole
	// (as templates/clusterrole.yaml has it) and its binding.
	release := "portal-rbac-" + run
	role := clusterRoleFromTemplate(t)
	role.Name = release
	role.Labels = nil
	bindingName := release
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: release}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = admin.CoreV1().ServiceAccounts(release).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "portal"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	mustCreate(err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "portal", Namespace: release}},
	}, metav1.CreateOptions{})
	mustCreate(err)

	// The team's plans, one per revocation mode: the portal owns the
	// namespace and the ClusterQueue, so every kind is created by the
	// portal itself.
	modes := []provision.RevokeMode{provision.RevokeDelete, provision.RevokeLock}
	var plans []provision.Plan
	for i, mode := range modes {
		settings := provision.DefaultClusterSettings()
		settings.ClusterQueueManagedByPortal = true
		settings.Cohort = "it-" + run
		settings.ClusterQueueNameFormat = "it-" + run + "-" + string(mode) + "-%s-clusterqueue"
		settings.OnRevoke = mode
		c := workflow.ExampleContract()
		c.Team = "red"
		c.Namespaces = []string{"it-" + run + "-" + string(mode)}
		c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/red-workload"
		c = c.Normalize()
		p, err := provision.BuildPlan(int64(i+1), 1, c.Hash(), c, settings)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		del := func(gvr schema.GroupVersionResource, name string) {
			if err := dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: delete %s %s: %v", gvr.Resource, name, err)
			}
		}
		for _, o := range slices.Concat(plans[0].Objects, plans[1].Objects) {
			switch o.Kind {
			case "Namespace":
				del(corev1.SchemeGroupVersion.WithResource("namespaces"), o.Name)
			case "ClusterQueue":
				del(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}, o.Name)
			case "ClusterRole", "ClusterRoleBinding":
				del(rbacv1.SchemeGroupVersion.WithResource(map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[o.Kind]), o.Name)
			}
		}
		del(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), bindingName)
		del(rbacv1.SchemeGroupVersion.WithResource("clusterroles"), role.Name)
		del(corev1.SchemeGroupVersion.WithResource("namespaces"), release)
	})

	// The portal's identity: the ServiceAccount, impersonated.
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + release + ":portal"}
	portal, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer learns of the new binding through its informer:
	// wait until it answers for it (a review, not a sleep).
	for {
		r, err := portal.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ServiceAccount was never allowed to create namespaces: the binding did not take effect")
		case <-time.After(100 * time.Millisecond):
		}
	}

	a, err := provision.NewApplier(as)
	if err != nil {
		t.Fatal(err)
	}
	steps := provision.ApplierSteps{Applier: a}
	run1 := func(what string, ss []provision.Step) {
		t.Helper()
		for _, s := range ss {
			if out, detail, err := steps.RunStep(ctx, s); err != nil {
				t.Fatalf("%s: %s: %v", what, s.Name(), err)
			} else {
				t.Logf("%s: %-70s %-10s %s", what, s.Name(), out, detail)
			}
		}
	}
	// The snapshot of several plans lists each kind across the cluster
	// (nothing applied yet: every object is reported deleted, none fails).
	for _, r := range a.DriftAll(ctx, plans) {
		if r.Err != nil {
			t.Fatalf("drift check of %d plans: %v", len(plans), r.Err)
		}
	}
	for i, mode := range modes {
		p := plans[i]
		t.Logf("revocation mode %s, namespace %s", mode, p.Namespace)
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("apply as the chart's ServiceAccount: %v", err)
		}
		if res, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("second apply: %v", err)
		} else {
			for _, r := range res {
				if r.Outcome != provision.Unchanged {
					t.Errorf("second apply: %s %s/%s %s, want unchanged", r.Kind, r.Namespace, r.Name, r.Outcome)
				}
			}
		}
		if items, err := a.Drift(ctx, p); err != nil {
			t.Fatalf("drift check: %v", err)
		} else if len(items) > 0 {
			t.Errorf("drift right after apply: %+v", items)
		}
		snap, err := steps.ForPlan(ctx, p)
		if err != nil {
			t.Fatalf("a re-apply job's snapshot: %v", err)
		}
		for _, s := range provision.ReapplySteps(p) {
			if _, _, err := snap.(provision.RevocationApplier).RunStep(ctx, s); err != nil {
				t.Fatalf("re-apply job from its snapshot: %s: %v", s.Name(), err)
			}
		}
		run1("hold", provision.HoldSteps(p, "Hold"))
		run1("release", provision.HoldSteps(p, "None"))
		run1("reapply", provision.ReapplySteps(p))
		run1("revoke "+string(mode), provision.RevocationPlan(p, mode))
	}

	reader, err := provision.NewClusterReader(as)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Nodes(ctx); err != nil {
		t.Errorf("cluster check, nodes: %v", err)
	}
	if _, err := reader.NetworkPolicyAgent(ctx); err != nil {
		t.Errorf("cluster check, network policy agent: %v", err)
	}
	if _, err := reader.PendingWorkloads(ctx, []string{plans[1].Namespace}); err != nil {
		t.Errorf("a team's workloads: %v", err)
	}
}
