package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// TestKubeSmoke checks the Kubernetes test bed that `make test` starts
// (hack/testbed/kube.sh): a real kube-apiserver with RBAC enforced, the
// controller-manager running and the Kueue CRDs served.
func TestKubeSmoke(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("namespace round trip", func(t *testing.T) {
		name := fmt.Sprintf("smoke-%d", time.Now().UnixNano())
		labels := map[string]string{
			"portal.hyperpod-governance.io/managed-by": "portal",
			"portal.hyperpod-governance.io/team":       "red",
		}
		created, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create namespace: %v", err)
		}
		t.Cleanup(func() {
			// t.Context is already cancelled in cleanups.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", name, err)
			}
		})
		if created.UID == "" {
			t.Fatalf("created namespace has no UID")
		}

		got, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace: %v", err)
		}
		for k, want := range labels {
			if got.Labels[k] != want {
				t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], want, got.Labels)
			}
		}
		if got.UID != created.UID {
			t.Errorf("read back UID %s, created %s", got.UID, created.UID)
		}

		// Deletion finishes only when kube-controller-manager's namespace
		// controller runs: this also proves it is up.
		if err := admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete namespace: %v", err)
		}
		for {
			_, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("namespace %s still exists after delete (is kube-controller-manager running?): %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("kueue API served", func(t *testing.T) {
		groups, err := admin.Discovery().ServerGroups()
		if err != nil {
			t.Fatalf("discovery: %v", err)
		}
		var preferred string
		for _, g := range groups.Groups {
			if g.Name == "kueue.x-k8s.io" {
				preferred = g.PreferredVersion.GroupVersion
			}
		}
		if preferred == "" {
			t.Fatalf("API group kueue.x-k8s.io is not served (Kueue CRDs not applied?)")
		}
		resources, err := admin.Discovery().ServerResourcesForGroupVersion(preferred)
		if err != nil {
			t.Fatalf("discovery of %s: %v", preferred, err)
		}
		served := map[string]bool{}
		for _, r := range resources.APIResources {
			served[r.Name] = true
		}
		for _, want := range []string{"clusterqueues", "localqueues"} {
			if !served[want] {
				t.Errorf("%s does not serve %s; it serves %v", preferred, want, served)
			}
		}
	})

	t.Run("rbac enforced for token user", func(t *testing.T) {
		tokensDir := testenv.Require(t, "PORTAL_TEST_KUBE_TOKENS_DIR")
		token, err := os.ReadFile(filepath.Join(tokensDir, "viewer-red"))
		if err != nil {
			t.Fatalf("read token of viewer-red: %v", err)
		}
		userCfg := rest.AnonymousClientConfig(cfg)
		userCfg.BearerToken = strings.TrimSpace(string(token))
		viewer, err := kubernetes.NewForConfig(userCfg)
		if err != nil {
			t.Fatal(err)
		}

		// Authenticated (not 401) but not authorized (403).
		_, err = viewer.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("viewer-red listing namespaces: got error %v, want Forbidden", err)
		}
		if !strings.Contains(err.Error(), `"viewer-red"`) {
			t.Errorf("Forbidden error does not name the user viewer-red: %v", err)
		}
	})
}
