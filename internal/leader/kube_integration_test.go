package leader_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/leader"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The RBAC the election needs (docs/replicas.md, the Helm chart's Role):
// exactly this, in the portal's namespace.
var electionRule = rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}

// Two portal processes elect on a Lease of the real kube-apiserver, as a
// user granted only electionRule: one leads, the other names it; the
// leader then dies (its connection is cut, so it can neither renew nor
// release), stops leading once it cannot renew, and the other takes over.
// A clean shutdown releases the Lease.
func TestKubeLeaseHandover(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	tokens := testenv.Require(t, "PORTAL_TEST_KUBE_TOKENS_DIR")
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(admin)
	ctx := t.Context()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := "leader-" + hex.EncodeToString(b)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	const user = "viewer-blue"
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "portal-leader-election"},
		Rules: []rbacv1.PolicyRule{electionRule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portal-leader-election"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "portal-leader-election"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(tokens, user))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = strings.TrimSpace(string(token))

	var dead atomic.Bool
	acfg := rest.CopyConfig(cfg)
	acfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if dead.Load() {
				return nil, errors.New("the process is dead")
			}
			return rt.RoundTrip(r)
		})
	})
	d := leader.Durations{LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
	a, err := leader.NewKube(acfg, ns, "", "pod-a_1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := leader.NewKube(cfg, ns, "", "pod-b_1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := run(t, a)
	aTerm := ca.leads(t, "a")
	cb := run(t, bb)
	for bb.Status().Leader() != "pod-a_1" {
		select {
		case <-cb.terms:
			t.Fatal("b leads while a holds the Lease")
		case <-time.After(d.RetryPeriod):
		}
	}
	if bb.Status().IsLeader() {
		t.Error("b says it leads while a holds the Lease")
	}
	dead.Store(true)
	done(t, aTerm, "a's term after it lost the apiserver")
	cb.leads(t, "b")
	ca.stop()
	<-ca.ended
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "pod-b_1" {
		t.Fatalf("Lease = %+v, %v; want held by pod-b_1", lease, err)
	}
	cb.stop()
	<-cb.ended
	lease, err = cs.CoordinationV1().Leases(ns).Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("after b's clean shutdown the Lease = %+v, %v; want released", lease.Spec, err)
	}
}
