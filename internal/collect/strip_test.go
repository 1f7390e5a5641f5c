package collect

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The transform keeps what the collector reads and nothing else.
func TestStrip(t *testing.T) {
	start := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	pod := fatPod(7, start)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		ResourceNeuronCore: resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1000Ki")}}})
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses,
		corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: start.Add(90 * time.Second)}}}},
		corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Time{Time: start.Add(30 * time.Second)}}}})
	obj, _ := strip(pod)
	p := obj.(*slimPod)
	// 1 GPU and 2 Neuron cores, each in its own resource; 4000m + 250m; 16 GiB = 16384 MiB + 1000 KiB
	// rounded up to 1 MiB; the last container finished at +90 s.
	if p.Accel != (accel{GPU: 1, NeuronCores: 2}) || p.CPUMilli != 4250 || p.MemoryMiB != 16385 || !p.End.Equal(start.Add(90*time.Second)) ||
		!p.Start.Equal(start) || p.NodeName != "node-7" || p.PriorityClass != "training" || p.Phase != corev1.PodFailed {
		t.Errorf("slim pod = %+v", p)
	}
	if m := p.GetObjectMeta(); m.GetLabels() != nil || m.GetAnnotations() != nil || m.GetManagedFields() != nil {
		t.Errorf("kept labels, annotations or managed fields: %+v", m)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelInstanceTypeStable: "ml.p5.48xlarge",
		LabelNodeHealth: "Unschedulable", "kubernetes.io/hostname": "n", "other": "x"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("192")},
			Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	obj, _ = strip(node)
	n := obj.(*corev1.Node)
	if len(n.Labels) != 2 || len(n.Status.Allocatable) != 1 || n.Status.Images != nil {
		t.Errorf("node = %+v", n)
	}

	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: 4, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelInstanceTypeStable: "ml.p5.48xlarge"}, Containers: []corev1.Container{{Name: "c", Env: pod.Spec.Containers[0].Env}}}}}}},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Message: "long message"}, {Type: "PodsReady"}}}}
	obj, _ = strip(wl)
	w := obj.(*kueue.Workload)
	if w.Labels != nil || len(w.Spec.PodSets) != 1 || len(w.Spec.PodSets[0].Template.Spec.Containers) != 0 || instanceType(w) != "ml.p5.48xlarge" ||
		len(w.Status.Conditions) != 1 || w.Status.Conditions[0].Message != "" {
		t.Errorf("workload = %+v", w)
	}
}
