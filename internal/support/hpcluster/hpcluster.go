// Package hpcluster builds, on the test bed's scheduling cluster, a cluster
// shaped like a SageMaker HyperPod EKS cluster with task governance, for
// integration tests that watch the real controllers work.
//
// The scheduling cluster (hack/testbed/cluster.sh, PORTAL_TEST_SCHED_KUBECONFIG)
// is a kube-apiserver of its own with a real kube-scheduler, the Job
// controller, the Kueue v0.17.0 controller manager (webhooks on loopback) and
// kwok, which plays the kubelets: kwok keeps the nodes it owns Ready and moves
// the pods bound to them to Running and, for pods of a Job, to Succeeded after
// the time the pod's kwok annotations say (RunFor).
//
// What the fixture creates, as HyperPod would:
//   - nodes of HyperPod instance types (node.kubernetes.io/instance-type =
//     ml.*, sagemaker.amazonaws.com/node-health-status = Schedulable) with the
//     allocatable the device plugins advertise (nvidia.com/gpu; for
//     Trainium aws.amazon.com/neuron, neurondevice and neuroncore);
//   - a ResourceFlavor per instance type, named after it;
//   - WorkloadPriorityClasses <class>-priority;
//   - per team, task governance's namespace hyperpod-ns-<team>, ClusterQueue
//     hyperpod-ns-<team>-clusterqueue in a cohort and LocalQueue
//     hyperpod-ns-<team>-localqueue, created under HyperPodFieldManager.
//
// Kueue objects are cluster-wide and flavor names are instance types, so one
// fixture at a time holds the cluster: Connect takes a lock (a ConfigMap in
// kube-system) that the test's cleanup releases after deleting everything it
// made; a lock whose holder (a test binary on this host) ended before its
// cleanup fails the next test at once, naming it, instead of a 10-minute
// wait. Without the scheduling cluster (outside `make test`), Connect skips
// the test with a message naming `make test`; under it, a missing cluster
// fails the test as every test bed part does.
package hpcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// Labels and names HyperPod uses; the same facts, with their sources, as
// internal/provision's LabelInstanceType, LabelNodeHealth,
// LabelHyperPodManagedQueue (this package imports no portal package, so that
// any package's tests may use it).
const (
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html
	LabelNodeHealth   = "sagemaker.amazonaws.com/node-health-status"
	HealthSchedulable = "Schedulable"
	// aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/cli/constants/command_constants.py
	// (SAGEMAKER_MANAGED_QUEUE_LABEL, SAGEMAKER_QUOTA_ALLOCATION_LABEL).
	LabelManagedQueue    = "sagemaker.amazonaws.com/sagemaker-managed-queue"
	LabelQuotaAllocation = "sagemaker.amazonaws.com/quota-allocation-id"
	// Kueue's job labels (sigs.k8s.io/kueue v0.17.0 pkg/controller/constants).
	LabelQueueName     = "kueue.x-k8s.io/queue-name"
	LabelPriorityClass = "kueue.x-k8s.io/priority-class"

	ResourceGPU          = corev1.ResourceName("nvidia.com/gpu")
	ResourceNeuron       = corev1.ResourceName("aws.amazon.com/neuron")
	ResourceNeuronDevice = corev1.ResourceName("aws.amazon.com/neurondevice")
	ResourceNeuronCore   = corev1.ResourceName("aws.amazon.com/neuroncore")
)

// InstanceType is a HyperPod instance type and what one node of it advertises.
type InstanceType struct {
	Name        string
	Allocatable corev1.ResourceList
}

// The instance types of the fixture, with AWS's figures (the same as
// internal/provision's DefaultAccelerators, which cites them).
var (
	// 8 H100, 192 vCPUs, 2048 GiB.
	P5 = InstanceType{"ml.p5.48xlarge", resources(192, 2048, map[corev1.ResourceName]int64{ResourceGPU: 8})}
	// 4 A10G, 48 vCPUs, 192 GiB.
	G5 = InstanceType{"ml.g5.12xlarge", resources(48, 192, map[corev1.ResourceName]int64{ResourceGPU: 4})}
	// 16 Trainium chips of 2 NeuronCore-v2 each, 128 vCPUs, 512 GiB. The
	// Neuron device plugin advertises aws.amazon.com/neuron (whole devices)
	// and aws.amazon.com/neuroncore (cores)
	// (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-device-plugin.html);
	// plugins up to Neuron 2.19 (the one HyperPod's chart installs) also
	// aws.amazon.com/neurondevice, which the HyperPod CLI requests
	// (aws/sagemaker-hyperpod-cli
	// src/sagemaker/hyperpod/training/quota_allocation_util.py); 2.19 was the
	// last release with it (internal/provision/settings.go cites Neuron's
	// announcement).
	Trn1 = InstanceType{"ml.trn1.32xlarge", resources(128, 512, map[corev1.ResourceName]int64{
		ResourceNeuron: 16, ResourceNeuronDevice: 16, ResourceNeuronCore: 32,
	})}
)

func resources(cpu, memGiB int64, extra map[corev1.ResourceName]int64) corev1.ResourceList {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memGiB<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	for name, n := range extra {
		rl[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return rl
}

// Cluster is the scheduling cluster, held by one test.
type Cluster struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	Kueue  kueueclient.Interface

	kwokKey, kwokValue string
	cleanups           []func(context.Context) error
}

const lockName = "hpcluster-fixture-lock"

// Connect returns the scheduling cluster, skipping the test without the test
// bed, and holds it for the test: another test's Connect waits until this
// test's cleanup has removed everything the fixture made.
func Connect(t testing.TB) *Cluster {
	t.Helper()
	// PORTAL_TESTBED_SCHED=0 make test opts out of building the cluster
	// (hack/testbed/up.sh); its tests then say so instead of failing.
	if os.Getenv("PORTAL_TESTBED_SCHED") == "0" {
		t.Skip("the scheduling cluster was opted out (PORTAL_TESTBED_SCHED=0): run `make test` without it")
	}
	kubeconfig := testenv.Require(t, "PORTAL_TEST_SCHED_KUBECONFIG")
	label := testenv.Require(t, "PORTAL_TEST_SCHED_KWOK_LABEL")
	key, value, ok := strings.Cut(label, "=")
	if !ok {
		t.Fatalf("PORTAL_TEST_SCHED_KWOK_LABEL=%q is not key=value", label)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	c := &Cluster{
		Config:    cfg,
		Kube:      kubernetes.NewForConfigOrDie(cfg),
		Kueue:     kueueclient.NewForConfigOrDie(cfg),
		kwokKey:   key,
		kwokValue: value,
	}
	c.lock(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := len(c.cleanups) - 1; i >= 0; i-- {
			if err := c.cleanups[i](ctx); err != nil {
				t.Errorf("hpcluster cleanup: %v", err)
			}
		}
		if err := c.Kube.CoreV1().ConfigMaps("kube-system").Delete(ctx, lockName, metav1.DeleteOptions{}); err != nil {
			t.Errorf("hpcluster: release the lock: %v", err)
		}
	})
	return c
}

func (c *Cluster) lock(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	host, _ := os.Hostname()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: "kube-system"},
		Data:       map[string]string{"holder": t.Name(), "pid": strconv.Itoa(os.Getpid()), "host": host},
	}
	start, holder := time.Now(), ""
	for {
		_, err := c.Kube.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			// Tests of several packages share the cluster, one at a
			// time: a wait here is another package's test, and it is
			// most of the run-to-run variance of these tests' times.
			if d := time.Since(start); d >= longWait {
				t.Logf("waited %s for the scheduling cluster (last held by %s)", d.Round(100*time.Millisecond), holder)
			}
			return
		}
		if !apierrors.IsAlreadyExists(err) {
			t.Fatalf("hpcluster: take the lock: %v", err)
		}
		if held, err := c.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, lockName, metav1.GetOptions{}); err == nil {
			if gone := holderGone(held.Data, host); gone != "" {
				t.Fatalf("hpcluster: %s", gone)
			}
			holder = held.Data["holder"]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("hpcluster: another test held the scheduling cluster for 10 minutes")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// holderGone says why the lock (its ConfigMap's data) will never be
// released, or "" while its holder may still release it: a test binary on
// this host that is no longer running (killed before its cleanup, as go
// test's -timeout kills one) left the lock, and the objects it made, behind.
// Waiting for it is futile: ci30 (2026-12-05) waited 10 minutes for an e2e
// binary that -timeout had killed.
func holderGone(data map[string]string, host string) string {
	pid, err := strconv.Atoi(data["pid"])
	if err != nil || pid <= 0 || data["host"] != host {
		return ""
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		return ""
	}
	return fmt.Sprintf("the scheduling cluster's lock (kube-system/%s) is held by %s of pid %d, which is no longer running: "+
		"a test binary ended before its cleanup (go test's -timeout?) and left the lock and its objects; restart the test bed", lockName, data["holder"], pid)
}

// onCleanup deletes obj's kind by name at cleanup and waits until it is gone
// (Kueue's finalizers hold ClusterQueues and flavors until nothing uses them).
func (c *Cluster) onCleanup(what string, del func(context.Context) error, get func(context.Context) error) {
	c.cleanups = append(c.cleanups, func(ctx context.Context) error {
		if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", what, err)
		}
		for {
			err := get(ctx)
			if apierrors.IsNotFound(err) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s still there: %v", what, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// AddNode creates a kwok node of the instance type, healthy as HyperPod
// labels it, and waits until kwok reports it Ready.
func (c *Cluster) AddNode(t testing.TB, name string, it InstanceType) *corev1.Node {
	t.Helper()
	ctx := t.Context()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				c.kwokKey:              c.kwokValue,
				LabelInstanceType:      it.Name,
				LabelNodeHealth:        HealthSchedulable,
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
			},
		},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable, Capacity: it.Allocatable},
	}
	created, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	c.onCleanup("node "+name,
		func(ctx context.Context) error {
			return c.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		},
		func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err
		})
	// Status is a subresource: unless the create kept it, set it as a
	// kubelet registers its capacity (kwok marks the node Ready meanwhile,
	// keeping the allocatable it finds).
	if _, ok := created.Status.Allocatable[firstAccelerator(it)]; !ok {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.Allocatable, n.Status.Capacity = it.Allocatable, it.Allocatable
			_, err = c.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("set node %s capacity: %v", name, err)
		}
	}
	var ready *corev1.Node
	WaitFor(t, "node "+name+" Ready", func() (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, ok := n.Status.Allocatable[firstAccelerator(it)]; !ok {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = n
				return true, nil
			}
		}
		return false, nil
	})
	// The API server taints a new node node.kubernetes.io/not-ready
	// (admission plugin TaintNodesByCondition); the node lifecycle
	// controller lifts it once the node is Ready. That controller does not
	// run here (it would mark kwok's nodes NotReady, having no leases from
	// them), so lift it as it would.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		for _, taint := range n.Spec.Taints {
			if taint.Key != corev1.TaintNodeNotReady {
				keep = append(keep, taint)
			}
		}
		n.Spec.Taints = keep
		ready, err = c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("lift node %s's not-ready taint: %v", name, err)
	}
	return ready
}

// firstAccelerator is the accelerator resource an instance type advertises.
func firstAccelerator(it InstanceType) corev1.ResourceName {
	for _, r := range []corev1.ResourceName{ResourceGPU, ResourceNeuron} {
		if _, ok := it.Allocatable[r]; ok {
			return r
		}
	}
	return corev1.ResourceCPU
}

// AddFlavor creates the ResourceFlavor HyperPod names after an instance type,
// selecting its nodes by node.kubernetes.io/instance-type.
func (c *Cluster) AddFlavor(t testing.TB, it InstanceType) {
	t.Helper()
	rf := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: it.Name},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{LabelInstanceType: it.Name}},
	}
	if _, err := c.Kueue.KueueV1beta2().ResourceFlavors().Create(t.Context(), rf, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceFlavor %s: %v", it.Name, err)
	}
	c.onCleanup("ResourceFlavor "+it.Name,
		func(ctx context.Context) error {
			return c.Kueue.KueueV1beta2().ResourceFlavors().Delete(ctx, it.Name, metav1.DeleteOptions{})
		},
		func(ctx context.Context) error {
			_, err := c.Kueue.KueueV1beta2().ResourceFlavors().Get(ctx, it.Name, metav1.GetOptions{})
			return err
		})
}

// AddPriorityClass creates WorkloadPriorityClass <class>-priority: HyperPod's
// cluster policy class "training" is Kueue's "training-priority"
// (docs/platform-reference.md).
func (c *Cluster) AddPriorityClass(t testing.TB, class string, value int32) string {
	t.Helper()
	name := class + "-priority"
	wpc := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Create(t.Context(), wpc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create WorkloadPriorityClass %s: %v", name, err)
	}
	c.onCleanup("WorkloadPriorityClass "+name,
		func(ctx context.Context) error {
			return c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Delete(ctx, name, metav1.DeleteOptions{})
		},
		func(ctx context.Context) error {
			_, err := c.Kueue.KueueV1beta2().WorkloadPriorityClasses().Get(ctx, name, metav1.GetOptions{})
			return err
		})
	return name
}

// Team is a team's queueing objects, as HyperPod task governance names them.
type Team struct {
	Name         string
	Namespace    string // hyperpod-ns-<team>
	ClusterQueue string // hyperpod-ns-<team>-clusterqueue
	LocalQueue   string // hyperpod-ns-<team>-localqueue
}

// Guarantee is a team's nominal quota of one accelerator resource on one
// flavor, with the vCPUs and memory that go with it (hyperPodResourceGroup);
// borrowing from the cohort is unlimited, and lending too.
type Guarantee struct {
	Flavor   InstanceType
	Resource corev1.ResourceName
	Count    int64
}

// AddHyperPodTeam creates what HyperPod task governance creates for a
// compute quota: the namespace, the ClusterQueue in cohort and the
// LocalQueue. The ClusterQueue reclaims lent quota by preempting borrowers
// (reclaimWithinCohort Any) and preempts lower priorities inside the queue,
// as a compute quota with PreemptTeamTasks LowerPriority and resource
// sharing LendAndBorrow does (the same mapping as internal/provision's plan).
// Each is a plain create under HyperPodFieldManager, as HyperPod's
// controller makes them, so that manager owns every field the create set or
// defaulted (LocalQueue spec.stopPolicy None included).
func (c *Cluster) AddHyperPodTeam(t testing.TB, name, cohort string, guarantees ...Guarantee) Team {
	t.Helper()
	return c.AddHyperPodTeamPreempting(t, name, cohort, kueue.PreemptionPolicyLowerPriority, guarantees...)
}

// AddHyperPodTeamPreempting is AddHyperPodTeam for a compute quota whose
// PreemptTeamTasks is LowerPriority (within: LowerPriority) or Never
// (within: Never): HyperPod's ClusterQueue preempts inside the queue as
// within says.
func (c *Cluster) AddHyperPodTeamPreempting(t testing.TB, name, cohort string, within kueue.PreemptionPolicy, guarantees ...Guarantee) Team {
	t.Helper()
	ctx := t.Context()
	team := Team{
		Name:         name,
		Namespace:    "hyperpod-ns-" + name,
		ClusterQueue: "hyperpod-ns-" + name + "-clusterqueue",
		LocalQueue:   "hyperpod-ns-" + name + "-localqueue",
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   team.Namespace,
		Labels: map[string]string{LabelManagedQueue: "true", LabelQuotaAllocation: name},
	}}
	hyperPod := metav1.CreateOptions{FieldManager: HyperPodFieldManager} // as HyperPod would (objects.go)
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, hyperPod); err != nil {
		t.Fatalf("create namespace %s: %v", team.Namespace, err)
	}

	rg := hyperPodResourceGroup(guarantees) // objects.go
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: team.ClusterQueue},
		Spec: kueue.ClusterQueueSpec{
			ResourceGroups:    []kueue.ResourceGroup{rg},
			CohortName:        kueue.CohortReference(cohort),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: team.Namespace}},
			Preemption: &kueue.ClusterQueuePreemption{
				WithinClusterQueue:  within,
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
			},
		},
	}
	if _, err := c.Kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, hyperPod); err != nil {
		t.Fatalf("create ClusterQueue %s: %v", team.ClusterQueue, err)
	}
	c.onCleanup("ClusterQueue "+team.ClusterQueue,
		func(ctx context.Context) error {
			return c.Kueue.KueueV1beta2().ClusterQueues().Delete(ctx, team.ClusterQueue, metav1.DeleteOptions{})
		},
		func(ctx context.Context) error {
			_, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, team.ClusterQueue, metav1.GetOptions{})
			return err
		})
	// Registered after the ClusterQueue's, so deleted before it: the
	// namespace's deletion removes the LocalQueue, the Jobs and their
	// Workloads, and Kueue keeps a ClusterQueue until none is admitted in it.
	c.onCleanup("namespace "+team.Namespace,
		func(ctx context.Context) error {
			return c.deleteNamespace(ctx, team.Namespace) // objects.go
		},
		func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, team.Namespace, metav1.GetOptions{})
			return err
		})
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: team.LocalQueue, Namespace: team.Namespace},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(team.ClusterQueue)},
	}
	if _, err := c.Kueue.KueueV1beta2().LocalQueues(team.Namespace).Create(ctx, lq, hyperPod); err != nil {
		t.Fatalf("create LocalQueue %s: %v", team.LocalQueue, err)
	}
	WaitFor(t, "ClusterQueue "+team.ClusterQueue+" active", func() (bool, error) {
		got, err := c.Kueue.KueueV1beta2().ClusterQueues().Get(ctx, team.ClusterQueue, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return metaCondTrue(got.Status.Conditions, kueue.ClusterQueueActive), nil
	})
	return team
}

func metaCondTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// RunFor returns the pod annotations that make kwok run a pod of a Job for
// d after it is bound (Running at once, Succeeded d later): kwok's general
// pod stages (sigs.k8s.io/kwok v0.8.0 kustomize/stage/pod/general) read each
// stage's delay and jitter from these annotations; jitter equal to the delay
// means exactly the delay.
func RunFor(d time.Duration) map[string]string {
	a := map[string]string{}
	for stage, delay := range map[string]time.Duration{"pod-create": 0, "pod-ready": 0, "pod-complete": d} {
		a[stage+".stage.kwok.x-k8s.io/delay"] = delay.String()
		a[stage+".stage.kwok.x-k8s.io/jitter-delay"] = delay.String()
	}
	return a
}

// terminationGrace is the grace period of the pods of SubmitJob's Jobs
// (see SubmitJob).
const terminationGrace = 2 * time.Second

// JobSpec is a batch/v1 Job for a team's LocalQueue: Pods pods in parallel,
// each asking for Count of Resource, running RunFor once started.
type JobSpec struct {
	Name          string
	Pods          int32
	Resource      corev1.ResourceName
	Count         int64
	PriorityClass string // a WorkloadPriorityClass name; empty for none
	RunFor        time.Duration
}

// SubmitJob creates the Job as a team member would: labelled with the
// team's LocalQueue (and priority class), created suspended as Kueue expects
// (its webhook suspends it anyway) so that nothing runs before admission.
func (c *Cluster) SubmitJob(t testing.TB, team Team, spec JobSpec) *batchv1.Job {
	t.Helper()
	labels := map[string]string{LabelQueueName: team.LocalQueue}
	if spec.PriorityClass != "" {
		labels[LabelPriorityClass] = spec.PriorityClass
	}
	qty := *resource.NewQuantity(spec.Count, resource.DecimalSI)
	suspend := true
	backoff := int32(0)
	// A short grace period: kwok's general pod-delete stage (sigs.k8s.io/kwok
	// v0.8.0 kustomize/stage/pod/general/pod-delete.yaml: delay 1 s,
	// jitterDurationFrom .metadata.deletionTimestamp) removes a deleted pod
	// at a random time between a second after its deletion and the end of
	// its grace period, as a kubelet would when the process exits somewhere
	// in it. With the default 30 s, an evicted or preempted pod held its GPUs
	// for 1 to 30 s, and the workload Kueue admitted in its place stayed
	// Pending (FailedScheduling: Insufficient nvidia.com/gpu) until then:
	// 10 to 22 s of each hold journey's release (2026-12-06, four runs
	// watched). A training process that checkpoints and exits within
	// terminationGrace behaves the same, faster; the figures the tests
	// check come from the times the controllers recorded either way.
	grace := int64(terminationGrace / time.Second)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: team.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism:  &spec.Pods,
			Completions:  &spec.Pods,
			Suspend:      &suspend,
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: RunFor(spec.RunFor)},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:  "train",
						Image: "registry.example/train:1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{spec.Resource: qty},
							Limits:   corev1.ResourceList{spec.Resource: qty},
						},
					}},
				},
			},
		},
	}
	created, err := c.Kube.BatchV1().Jobs(team.Namespace).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s/%s: %v", team.Namespace, spec.Name, err)
	}
	return created
}

// WorkloadOf returns the Workload Kueue made for a Job (the one it owns).
func (c *Cluster) WorkloadOf(ctx context.Context, job *batchv1.Job) (*kueue.Workload, error) {
	list, err := c.Kueue.KueueV1beta2().Workloads(job.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].OwnerReferences {
			if o.UID == job.UID {
				return &list.Items[i], nil
			}
		}
	}
	return nil, apierrors.NewNotFound(kueue.Resource("workloads"), "of job "+job.Name)
}

// WaitFor polls cond until it holds. The deadline only turns a lost event
// into a failure instead of a hang; it is not a timing assertion. A wait
// of longWait or more is logged with what it waited for: the scheduling
// tests' time varies by up to twice from run to run (docs/testing.md), and
// the log of a passing run says which step took it.
func WaitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(waitDeadline)
	var last error
	for {
		ok, err := cond()
		if ok {
			if d := time.Since(start); d >= longWait {
				t.Logf("waited %s for %s", d.Round(100*time.Millisecond), what)
			}
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("never happened within %s: %s (last error: %v)", waitDeadline, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const (
	// waitDeadline bounds WaitFor: a lost event, not a slow one. It was
	// 90 s; the margin is for a busier machine than this one (the logged
	// waits, longWait, say how long each step took).
	waitDeadline = 3 * time.Minute
	// longWait is the wait WaitFor logs.
	longWait = 10 * time.Second
)
