package hpcluster

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Cond is the condition of type typ among conds, or nil.
func Cond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// CondTrue reports whether conds hold typ with status True.
func CondTrue(conds []metav1.Condition, typ string) bool {
	c := Cond(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// Admitted reports whether Kueue admitted wl (condition Admitted True).
func Admitted(wl *kueue.Workload) bool { return CondTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) }

// WaitWorkload polls the Workload of job until ok holds and returns it.
func (c *Cluster) WaitWorkload(t testing.TB, job *batchv1.Job, what string, ok func(*kueue.Workload) bool) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	WaitFor(t, job.Name+": "+what, func() (bool, error) {
		var err error
		wl, err = c.WorkloadOf(t.Context(), job)
		return err == nil && ok(wl), err
	})
	return wl
}

// RunningPods are the pods of job that kwok runs (phase Running, not being
// deleted).
func (c *Cluster) RunningPods(t testing.TB, job *batchv1.Job) ([]corev1.Pod, error) {
	list, err := c.Kube.CoreV1().Pods(job.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// WaitRunning waits until n pods of job run (bound by kube-scheduler,
// started by kwok) and returns them.
func (c *Cluster) WaitRunning(t testing.TB, job *batchv1.Job, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	WaitFor(t, fmt.Sprintf("%d running pods of %s", n, job.Name), func() (bool, error) {
		var err error
		pods, err = c.RunningPods(t, job)
		return err == nil && len(pods) == n, err
	})
	return pods
}
