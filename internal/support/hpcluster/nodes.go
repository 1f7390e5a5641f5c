package hpcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// HyperPod's node health values besides Schedulable
// (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html,
// label sagemaker.amazonaws.com/node-health-status): deep health checks
// running, failed and to be replaced, failed and to be rebooted.
const (
	HealthUnschedulable                   = "Unschedulable"
	HealthUnschedulablePendingReplacement = "UnschedulablePendingReplacement"
	HealthUnschedulablePendingReboot      = "UnschedulablePendingReboot"
)

// SetNodeHealth labels a node with a HyperPod health status, as HyperPod's
// health monitoring does when a node fails or recovers.
func (c *Cluster) SetNodeHealth(t testing.TB, name, health string) {
	t.Helper()
	c.updateNode(t, name, func(labels map[string]string, cordoned *bool) { labels[LabelNodeHealth] = health })
}

// Cordon marks a node unschedulable (spec.unschedulable), as
// `kubectl cordon` does; uncordon with false.
func (c *Cluster) Cordon(t testing.TB, name string, cordon bool) {
	t.Helper()
	c.updateNode(t, name, func(_ map[string]string, cordoned *bool) { *cordoned = cordon })
}

func (c *Cluster) updateNode(t testing.TB, name string, change func(labels map[string]string, cordoned *bool)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n.Labels, &n.Spec.Unschedulable)
		_, err = c.Kube.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update node %s: %v", name, err)
	}
}
