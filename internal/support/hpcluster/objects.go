package hpcluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// HyperPodFieldManager is the field manager under which the fixture creates
// what HyperPod task governance creates (AddHyperPodTeam: the namespace,
// the ClusterQueue and the LocalQueue).
//
// HyperPod's add-on is not open source and AWS does not publish the name
// its controller writes under; what AWS documents is that the add-on
// creates the queues itself ("When installed, HyperPod creates and modifies
// SageMaker AI-managed Kubernetes resources such as ... ClusterQueues,
// LocalQueues", github:aws-samples/awsome-distributed-training
// 1.architectures/7.sagemaker-hyperpod-eks/task-governance/README.md). So
// the fixture does what a controller does: a plain create (not an apply)
// under a manager of its own. The API server records a create under the
// request's fieldManager, or the user agent's prefix when none is given
// (k8s.io/apiserver@v0.37.2 pkg/endpoints/handlers/create.go,
// managerOrUserAgent), and applies the CRD's defaults while decoding it, so
// that manager owns Kueue's defaulted spec.stopPolicy None too (the CRD
// default, sigs.k8s.io/kueue@v0.17.0 apis/kueue/v1beta2/localqueue_types.go
// LocalQueueSpec.StopPolicy "+kubebuilder:default=None"). That is the
// ownership a portal hold on HyperPod's LocalQueue meets. The name is the
// one internal/provision's tests give their stand-in for HyperPod.
const HyperPodFieldManager = "hyperpod-task-governance"

// DeleteAtCleanup deletes objs when the test ends, before anything the
// fixture made earlier, and waits until each is gone: the objects a test
// applied itself on the cluster (say portal plans' ClusterQueues,
// WorkloadPriorityClasses and ResourceFlavors). Call it once with all of
// them: each object is deleted once, namespaced objects are left to their
// namespace, namespaces go first (so that their Workloads no longer hold a
// ClusterQueue), ResourceFlavors and WorkloadPriorityClasses last (Kueue
// keeps a flavor while a ClusterQueue names it).
//
// The portal's ValidatingAdmissionPolicy and its bindings stay: the portal
// never deletes them (they are shared by every team; revoke refuses), and
// the next test's plan applies them again. Deleting them is what breaks the
// API server: in Kubernetes before v1.37 the informer of a policy's
// ConfigMap parameters stops for good once no binding names ConfigMap for a
// second, and every later request in a namespace whose parameters it never
// saw is refused ("no params found for policy binding with `Deny`
// parameterNotFoundAction"; k8s.io/apiserver@v0.35.4
// pkg/admission/plugin/policy/generic/policy_source.go calculatePolicyData,
// kubernetes/kubernetes#130887 and #133827; v1.37 reads a missing parameter
// from the API instead, kubernetes/kubernetes#134423). On the test bed's
// v1.35 that refused Kueue's suspend and unsuspend of the next hold test's
// Jobs (2026-12-06).
func (c *Cluster) DeleteAtCleanup(t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	objs = slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		return o != nil && o.GroupVersionKind().Group == "admissionregistration.k8s.io"
	})
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	// Cleanups run in reverse: registered first, deleted last.
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "ResourceFlavor", "WorkloadPriorityClass":
			return 0
		case "Namespace":
			return 2
		}
		return 1
	}
	seen := map[string]bool{}
	for r := range 3 {
		for _, o := range objs {
			if o == nil || o.GetNamespace() != "" || rank(o) != r || seen[o.GetKind()+"/"+o.GetName()] {
				continue
			}
			seen[o.GetKind()+"/"+o.GetName()] = true
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("hpcluster: %s %s: %v", gvk.Kind, o.GetName(), err)
			}
			ri, name := dyn.Resource(m.Resource), o.GetName()
			c.onCleanup(gvk.Kind+" "+name,
				func(ctx context.Context) error {
					if gvk.Kind == "Namespace" {
						return c.deleteNamespace(ctx, name)
					}
					return ri.Delete(ctx, name, metav1.DeleteOptions{})
				},
				func(ctx context.Context) error {
					_, err := ri.Get(ctx, name, metav1.GetOptions{})
					return err
				})
		}
	}
}

// deleteNamespace deletes the namespace name, its pods first and at once:
// kwok's pods have nothing to stop, and a namespace still holding pods waits
// out their grace period (30 s by default) before the namespace controller
// looks again.
func (c *Cluster) deleteNamespace(ctx context.Context, name string) error {
	zero := int64(0)
	if err := c.Kube.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	return c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
}

// hyperPodResourceGroup is the ClusterQueue quota HyperPod task governance
// makes from a compute quota of the guarantees: each guarantee's
// accelerators, and the vCPUs and memory that go with them. A compute
// quota allocates all three, and when only accelerators are given
// "SageMaker AI automatically allocates ratio-based values for [vCPU and
// MemoryInGiB] based on the number of accelerators you provide. For
// example, if you allocate 16 out of 32 total accelerators, SageMaker AI
// uses the ratio of 0.5"
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ComputeQuotaResourceConfig.html,
// Accelerators). Without cpu and memory covered, Kueue could admit no pod
// that requests them ("resource memory unavailable in ClusterQueue"), and
// the portal's LimitRange gives every pod a default request of both. Every
// flavor of a resource group lists every covered resource, in order
// (Kueue's ClusterQueue validation), so a flavor has 0 of another
// flavor's accelerator.
func hyperPodResourceGroup(guarantees []Guarantee) kueue.ResourceGroup {
	rg := kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}}
	for _, g := range guarantees {
		if !slices.Contains(rg.CoveredResources, g.Resource) {
			rg.CoveredResources = append(rg.CoveredResources, g.Resource)
		}
	}
	for _, g := range guarantees {
		perNode := g.Flavor.Allocatable[g.Resource]
		share := func(r corev1.ResourceName) resource.Quantity {
			q := g.Flavor.Allocatable[r]
			if perNode.Value() == 0 { // an accelerator the instance type lacks
				return *resource.NewQuantity(0, q.Format)
			}
			return *resource.NewMilliQuantity(q.MilliValue()*g.Count/perNode.Value(), q.Format)
		}
		fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(g.Flavor.Name)}
		for _, r := range rg.CoveredResources {
			q := resource.MustParse("0")
			switch r {
			case corev1.ResourceCPU, corev1.ResourceMemory:
				q = share(r)
			case g.Resource:
				q = *resource.NewQuantity(g.Count, resource.DecimalSI)
			}
			fq.Resources = append(fq.Resources, kueue.ResourceQuota{Name: r, NominalQuota: q})
		}
		rg.Flavors = append(rg.Flavors, fq)
	}
	return rg
}
