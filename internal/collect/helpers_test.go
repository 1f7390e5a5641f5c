package collect

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// migratedDB is a fresh, migrated SQLite store, closed when the test ends.
func migratedDB(t testing.TB) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

// testbedClients are clients of the test bed's kube-apiserver (the test is
// skipped without one, unless the test bed is required).
func testbedClients(t *testing.T) (*kubernetes.Clientset, *kueueclient.Clientset) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testenv.Require(t, "PORTAL_TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg)
}

// createNode makes a Schedulable node of instance type itype offering gpus
// GPUs (its status set as a kubelet would), deleted when the test ends.
func createNode(ctx context.Context, t *testing.T, kube kubernetes.Interface, name, itype, gpus string) {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelInstanceTypeStable: itype, LabelNodeHealth: HealthSchedulable}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Allocatable = corev1.ResourceList{ResourceGPU: resource.MustParse(gpus)}
	n.Status.Capacity = n.Status.Allocatable
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}
