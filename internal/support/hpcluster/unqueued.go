package hpcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunUnqueuedPod starts, in the team's namespace, a bare pod asking for
// count of res on a node of instance type it, without Kueue's queue-name
// label, as a member who runs `kubectl run` past the team's queue would,
// and waits until it runs. Kueue leaves it alone: the scheduling cluster's
// Kueue integrates batch/job only and, as HyperPod's add-on, does not
// manage jobs without a queue name (manageJobsWithoutQueueName: false;
// hack/testbed/cluster.sh cites both), so kube-scheduler places it on free
// capacity and no ClusterQueue accounts for it. kwok keeps it Running
// (its pod-complete stage finishes only pods of Jobs) until it is deleted,
// with the namespace at the test's end.
func (c *Cluster) RunUnqueuedPod(t testing.TB, team Team, name string, it InstanceType, res corev1.ResourceName, count int64) *corev1.Pod {
	t.Helper()
	qty := *resource.NewQuantity(count, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: team.Namespace, Annotations: RunFor(0)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{LabelInstanceType: it.Name},
			Containers: []corev1.Container{{
				Name:      "notebook",
				Image:     "registry.example/notebook:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{res: qty}, Limits: corev1.ResourceList{res: qty}},
			}},
		},
	}
	if _, err := c.Kube.CoreV1().Pods(team.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", team.Namespace, name, err)
	}
	var running *corev1.Pod
	WaitFor(t, "pod "+name+" Running", func() (bool, error) {
		p, err := c.Kube.CoreV1().Pods(team.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		running = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	return running
}
