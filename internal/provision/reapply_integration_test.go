package provision_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestDriftReapplyIntegration is issue 4's drift journey on the real API
// server: provision, change the quota and add a RoleBinding by hand, the
// drift checker reports both, an admin's re-apply job fixes them, and the
// next check finds nothing.
func TestDriftReapplyIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b.setInventory(ctx, 1)
	tn := b.approve(ctx, "wint"+wintRandom(t), b.plans)
	w := b.worker("w1")
	b.runOnce(ctx, w)
	if st := b.state(ctx, tn.conn.ID); st != workflow.StateActive {
		t.Fatalf("state after provisioning = %s", st)
	}
	b.settleQuota(ctx, tn)

	checker := &provision.DriftChecker{
		List: func(ctx context.Context) ([]provision.ConnVersion, error) {
			ps, err := b.db.Provisioned(ctx)
			var out []provision.ConnVersion
			for _, p := range ps {
				if p.ConnectionID == tn.conn.ID {
					out = append(out, provision.ConnVersion{ConnectionID: p.ConnectionID, Version: p.Version})
				}
			}
			return out, err
		},
		Plans:    b.plans,
		CheckAll: provision.DriftAllOf(b.look, nil),
		Save:     b.db.SaveDrift,
		Clock:    b.clock.Now,
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("fresh connection: %d drifted, %v", n, err)
	}

	// Hand edits: double the GPU quota, grant admin to another team.
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("PORTAL_TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	ns := tn.plan.Namespace
	q, err := kc.CoreV1().ResourceQuotas(ns).Get(ctx, provision.NameResourceQuota, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")]
	gpu.Add(gpu)
	q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")] = gpu
	if _, err := kc.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "team-blue-submitters"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	b.clock.Add(time.Minute)
	if n, err := checker.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after hand edits: %d drifted, %v", n, err)
	}
	r, err := b.db.Drift(ctx, tn.conn.ID)
	if err != nil || len(r.Items) != 2 {
		t.Fatalf("drift report = %+v, %v; want the quota and the binding", r, err)
	}
	var kinds []string
	for _, it := range r.Items {
		kinds = append(kinds, it.Kind+" "+it.What)
	}
	if got := strings.Join(kinds, ", "); got != "ResourceQuota changed, RoleBinding extra" {
		t.Errorf("drift = %s", got)
	}

	// The admin re-applies: one job, the connection stays active.
	job, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "fix drift", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.runOnce(ctx, w)
	if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("re-apply job = %s: %s", j.State, j.LastError)
	}
	steps := b.steps(ctx, job.ID)
	last := steps[len(steps)-1]
	if last.Outcome != string(provision.Deleted) || !strings.Contains(last.Detail, "by-hand") {
		t.Errorf("prune step = %s %q", last.Outcome, last.Detail)
	}
	if st := b.state(ctx, tn.conn.ID); st != workflow.StateActive {
		t.Errorf("state after re-apply = %s", st)
	}
	b.clock.Add(time.Minute)
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		t.Errorf("after re-apply: %d drifted, %v", n, err)
	}
	acts := auditActions(b.auditOf(ctx, tn.conn.ID))
	for _, want := range []string{"drift.detected", "reapply.enqueue", "reapply.succeeded", "drift.resolved"} {
		if !strings.Contains(strings.Join(acts, " "), want) {
			t.Errorf("audit lacks %s: %v", want, acts)
		}
	}
	b.verifyAudit(ctx)
	// Re-apply is refused for a connection that is not live.
	if _, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "again", b.clock.Now()); err != nil {
		t.Errorf("a second re-apply of a live connection: %v", err)
	}
}
