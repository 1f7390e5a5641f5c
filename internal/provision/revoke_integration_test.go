package provision

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

var localQueuesGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}

// handBinding grants the team's viewers the cluster's "view" role in ns,
// as someone might by hand: access the plan does not know about.
func handBinding(ns string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team-red-viewers"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
}

// runRevocation runs steps in order as the worker would, stopping at the
// first error, and returns the outcomes.
func runRevocation(ctx context.Context, t *testing.T, a *Applier, steps []Step) []Outcome {
	t.Helper()
	out := make([]Outcome, len(steps))
	for i, s := range steps {
		o, detail, err := ApplierSteps{Applier: a}.RunStep(ctx, s)
		if err != nil {
			t.Fatalf("step %d %s: %v", i, s.Name(), err)
		}
		out[i] = o
		t.Logf("  %-70s %-10s %s", s.Name(), o, detail)
	}
	return out
}

// TestRevocationIntegration provisions the example plan on the test bed's
// real API server, adds a RoleBinding by hand, revokes in each mode and
// checks what is left: no RoleBinding and no queue in the namespace, and
// the namespace gone (delete) or kept and locked (lock). Running the
// revocation again changes nothing; a namespace the portal never made is
// left alone.
func TestRevocationIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	counted, counter := countRequests(cfg)
	a, err := NewApplier(counted)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := runID(t)

	for i, mode := range []RevokeMode{RevokeDelete, RevokeLock} {
		t.Run(string(mode), func(t *testing.T) {
			s := itSettings(run)
			s.OnRevoke = mode
			s.ClusterQueueNameFormat = "it-" + run + "-" + string(mode) + "-%s-clusterqueue"
			p := mustPlan(t, int64(100+i), itContract("red", "it-"+run+"-rv-"+string(mode)), s)
			deleteAfter(t, a.Client, p)
			ns := p.Namespace
			if _, err := a.Apply(ctx, p); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, handBinding(ns), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}

			steps := RevocationPlan(p, p.OnRevoke)
			counter.Reset()
			start := time.Now()
			outcomes := runRevocation(ctx, t, a, steps)
			elapsed := time.Since(start)
			byMethod, total, _ := counterSnapshot(counter)
			t.Logf("%s revocation: %d steps in %v, %d requests %v", mode, len(steps), elapsed.Round(time.Millisecond), total, byMethod)
			for i, st := range steps {
				if st.Action == ActionDelete && outcomes[i] != Deleted {
					t.Errorf("%s: %s, want deleted", st.Name(), outcomes[i])
				}
			}

			rbs, err := admin.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rbs.Items) != 0 {
				t.Errorf("%d RoleBindings left in %s (%s...), want none", len(rbs.Items), ns, rbs.Items[0].Name)
			}
			lqs, err := a.Client.Resource(localQueuesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(lqs.Items) != 0 {
				t.Errorf("%d LocalQueues left in %s, want none", len(lqs.Items), ns)
			}
			cq := strings.Replace(s.ClusterQueueNameFormat, "%s", "red", 1)
			if _, err := a.Client.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}).
				Get(ctx, cq, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the portal's ClusterQueue %s: %v, want NotFound", cq, err)
			}
			if _, err := admin.RbacV1().Roles(ns).Get(ctx, NameViewerRole, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Role %s: %v, want NotFound", NameViewerRole, err)
			}

			live, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			switch mode {
			case RevokeDelete:
				if err == nil && live.DeletionTimestamp == nil {
					t.Errorf("namespace %s still there and not terminating", ns)
				} else if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			case RevokeLock:
				if err != nil || live.DeletionTimestamp != nil || live.Labels[LabelRevoked] != "true" {
					t.Fatalf("namespace %s: %v, %+v; want kept and labelled %s=true", ns, err, live, LabelRevoked)
				}
				assertLocked(ctx, t, admin, ns)
			}

			// Again: nothing left to do, and nothing fails.
			again := runRevocation(ctx, t, a, steps)
			for i, st := range steps {
				switch {
				case st.Action == ActionLock && again[i] != Unchanged:
					t.Errorf("second run: %s %s, want unchanged", st.Name(), again[i])
				case st.Action != ActionLock && again[i] != Absent && !(st.Object.Kind == "Namespace" && again[i] == Deleted):
					t.Errorf("second run: %s %s, want absent", st.Name(), again[i])
				}
			}
		})
	}

	t.Run("a namespace the portal did not make is left alone", func(t *testing.T) {
		s := itSettings(run)
		s.OnRevoke = RevokeDelete
		p := mustPlan(t, 199, itContract("red", "it-"+run+"-foreign"), s)
		deleteAfter(t, a.Client, p)
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings(p.Namespace).Create(ctx, handBinding(p.Namespace), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		outcomes := runRevocation(ctx, t, a, RevocationPlan(p, RevokeDelete))
		if last := outcomes[len(outcomes)-1]; last != Kept {
			t.Errorf("namespace step %s, want kept", last)
		}
		if _, err := admin.RbacV1().RoleBindings(p.Namespace).Get(ctx, "by-hand", metav1.GetOptions{}); err != nil {
			t.Errorf("the RoleBinding in a namespace that is not the portal's: %v, want it kept", err)
		}
		if ns, err := admin.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("namespace %s: %v, want it kept", p.Namespace, err)
		}
	})
}

// assertLocked checks a locked namespace: only the zero quota and the
// default-deny policy are left of the plan, and a pod is refused.
func assertLocked(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, ns string) {
	t.Helper()
	quotas, err := admin.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(quotas.Items) != 1 || quotas.Items[0].Name != NameRevokedQuota {
		t.Fatalf("quotas %v, want only %q", quotas.Items, NameRevokedQuota)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourcePods, "requests." + ResourceNvidiaGPU} {
		if q := quotas.Items[0].Spec.Hard[r]; !q.IsZero() {
			t.Errorf("revoked quota %s = %s, want 0", r, q.String())
		}
	}
	nps, err := admin.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nps.Items) != 1 || nps.Items[0].Name != NamePolicyDefaultDeny {
		t.Errorf("%d NetworkPolicies left, want only %s", len(nps.Items), NamePolicyDefaultDeny)
	}
	// Quota admission needs the controller's status first.
	for {
		q, err := admin.CoreV1().ResourceQuotas(ns).Get(ctx, NameRevokedQuota, metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("revoked quota status never computed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	_, err = admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after-revocation"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: small, Limits: small}}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: "+NameRevokedQuota) {
		t.Errorf("a pod in the locked namespace: %v, want Forbidden by the revoked quota", err)
	}
	t.Logf("rejected: %v", err)
}
