package provision

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

var clusterQueuesGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}

// waitForQuota waits until the quota controller has computed the team
// quota's status: until then quota admission refuses every pod.
func waitForQuota(ctx context.Context, t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	for {
		q, err := admin.CoreV1().ResourceQuotas(ns).Get(ctx, NameResourceQuota, metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) > 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("quota status never computed (is kube-controller-manager running?): %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// can asks the API server, as the client's user, whether it may do verb on
// resource (and subresource) in ns (cluster-scoped when ns is empty): a
// SelfSubjectAccessReview, which needs no CRD for the resource.
func can(ctx context.Context, t *testing.T, c kubernetes.Interface, verb, group, res, sub, ns string) bool {
	t.Helper()
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: res, Subresource: sub, Namespace: ns,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview %s %s/%s: %v", verb, res, sub, err)
	}
	return r.Status.Allowed
}

// TestTeamNamespaceOnHyperPodIntegration provisions two teams on the test
// bed's real API server and checks what a HyperPod cluster needs of the
// namespace: a pod requesting 200Gi without a limit is admitted (the
// LimitRange sets no default limit to contradict it); submitters may run
// HyperPodPyTorchJobs, exec into and read the logs of their pods (but not
// create bare pods); and the HyperPod CLI's queue listing works for the
// team's own namespace and ClusterQueue, not another team's, until the
// connection is revoked.
func TestTeamNamespaceOnHyperPodIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a, err := NewApplier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := runID(t)
	s := itSettings(run)
	red := mustPlan(t, 1, itContract("red", "it-"+run+"-red"), s)
	blue := mustPlan(t, 2, itContract("blue", "it-"+run+"-blue"), s)
	deleteAfter(t, a.Client, red, blue)
	for _, p := range []Plan{red, blue} {
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("apply %s: %v", p.Team, err)
		}
	}
	users := map[string]*kubernetes.Clientset{}
	for _, u := range []string{"viewer-red", "submitter-red", "viewer-blue"} {
		c, err := kubernetes.NewForConfig(userConfig(t, cfg, u))
		if err != nil {
			t.Fatal(err)
		}
		users[u] = c
	}

	var big *corev1.Pod
	t.Run("a pod requesting 200Gi without a limit is admitted", func(t *testing.T) {
		waitForQuota(ctx, t, admin, red.Namespace)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "big-memory"},
			Spec: corev1.PodSpec{
				ServiceAccountName: ServiceAccountName("red"),
				RestartPolicy:      corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "train", Image: "busybox",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Gi")},
					},
				}},
			},
		}
		created, err := admin.CoreV1().Pods(red.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod requesting 200Gi memory without a limit: %v", err)
		}
		big = created
		res := big.Spec.Containers[0].Resources
		if got := res.Requests.Memory().String(); got != "200Gi" {
			t.Errorf("memory request %s, want 200Gi kept", got)
		}
		if _, ok := res.Limits[corev1.ResourceMemory]; ok {
			t.Errorf("memory limit %s was defaulted: a default limit below a request makes pods invalid", res.Limits.Memory())
		}
		if got := res.Requests.Cpu().String(); got != "500m" {
			t.Errorf("cpu request %s, want the LimitRange default 500m (the quota needs one)", got)
		}
	})

	t.Run("submitters run HyperPodPyTorchJobs, exec and read logs", func(t *testing.T) {
		type check struct {
			user, verb, group, res, sub, ns string
			want                            bool
		}
		for _, c := range []check{
			{"submitter-red", "create", HyperPodJobGroup, HyperPodJobResource, "", red.Namespace, true},
			{"submitter-red", "delete", HyperPodJobGroup, HyperPodJobResource, "", red.Namespace, true},
			{"submitter-red", "list", HyperPodJobGroup, HyperPodJobResource, "", red.Namespace, true},
			{"submitter-red", "create", HyperPodJobGroup, HyperPodJobResource, "", blue.Namespace, false},
			{"submitter-red", "create", "", "pods", "exec", red.Namespace, true},
			{"submitter-red", "get", "", "pods", "log", red.Namespace, true},
			{"submitter-red", "create", "", "pods", "", red.Namespace, false},
			{"viewer-red", "list", HyperPodJobGroup, HyperPodJobResource, "", red.Namespace, true},
			{"viewer-red", "get", "", "pods", "log", red.Namespace, true},
			{"viewer-red", "create", HyperPodJobGroup, HyperPodJobResource, "", red.Namespace, false},
			{"viewer-red", "create", "", "pods", "exec", red.Namespace, false},
			{"viewer-blue", "get", "", "pods", "log", red.Namespace, false},
		} {
			what := c.verb + " " + c.res
			if c.sub != "" {
				what += "/" + c.sub
			}
			if c.group != "" {
				what += "." + c.group
			}
			if got := can(ctx, t, users[c.user], c.verb, c.group, c.res, c.sub, c.ns); got != c.want {
				t.Errorf("%s may %s in %s: %v, want %v", c.user, what, c.ns, got, c.want)
			}
		}
		if big == nil {
			t.Skip("no pod to read the logs of (see the previous subtest)")
		}
		// The log request passes authorization and fails only because the
		// test bed has no node to run the pod on; another team's viewer is
		// refused before that.
		_, err := users["submitter-red"].CoreV1().Pods(red.Namespace).GetLogs(big.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if apierrors.IsForbidden(err) {
			t.Errorf("submitter-red reading its pod's logs: %v, want authorized", err)
		}
		t.Logf("submitter-red reading logs of an unscheduled pod: %v", err)
		_, err = users["viewer-blue"].CoreV1().Pods(red.Namespace).GetLogs(big.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if !apierrors.IsForbidden(err) {
			t.Errorf("viewer-blue reading red's pod logs: %v, want Forbidden", err)
		}
	})

	redCQ, blueCQ := team(s.ClusterQueueNameFormat, "red"), team(s.ClusterQueueNameFormat, "blue")
	submitterDyn, err := dynamic.NewForConfig(userConfig(t, cfg, "submitter-red"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the HyperPod CLI's queue listing sees the team's own queue only", func(t *testing.T) {
		sub := users["submitter-red"]
		if _, err := sub.CoreV1().Namespaces().Get(ctx, red.Namespace, metav1.GetOptions{}); err != nil {
			t.Errorf("submitter-red reads its namespace's labels: %v", err)
		}
		if _, err := submitterDyn.Resource(clusterQueuesGVR).Get(ctx, redCQ, metav1.GetOptions{}); err != nil {
			t.Errorf("submitter-red gets its ClusterQueue %s: %v", redCQ, err)
		}
		if _, err := sub.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "sagemaker.amazonaws.com/cluster-name"}); err != nil {
			t.Errorf("submitter-red lists the HyperPod nodes: %v", err)
		}
		if _, err := sub.CoreV1().Namespaces().Get(ctx, blue.Namespace, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red gets blue's namespace: %v, want Forbidden", err)
		}
		if _, err := submitterDyn.Resource(clusterQueuesGVR).Get(ctx, blueCQ, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red gets blue's ClusterQueue %s: %v, want Forbidden", blueCQ, err)
		}
		if _, err := sub.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red lists every namespace: %v, want Forbidden", err)
		}
		if _, err := submitterDyn.Resource(clusterQueuesGVR).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red lists every ClusterQueue: %v, want Forbidden", err)
		}
		if _, err := users["viewer-red"].CoreV1().Namespaces().Get(ctx, red.Namespace, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("viewer-red (not a submitter) gets the namespace: %v, want Forbidden", err)
		}
	})

	t.Run("revocation takes the cluster-scoped access away", func(t *testing.T) {
		if big != nil {
			if err := admin.CoreV1().Pods(red.Namespace).Delete(ctx, big.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		runRevocation(ctx, t, a, RevocationPlan(red, RevokeDelete))
		name := QueueReaderName(red.Namespace)
		if _, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRoleBinding %s after revocation: %v, want NotFound", name, err)
		}
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s after revocation: %v, want NotFound", name, err)
		}
		// Authorization comes before the lookup: Forbidden, not NotFound,
		// although revocation deleted both.
		if _, err := submitterDyn.Resource(clusterQueuesGVR).Get(ctx, redCQ, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red gets its ClusterQueue after revocation: %v, want Forbidden", err)
		}
		if _, err := users["submitter-red"].CoreV1().Namespaces().Get(ctx, red.Namespace, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("submitter-red gets its namespace after revocation: %v, want Forbidden", err)
		}
		// Blue's reader is another connection's and stays.
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, QueueReaderName(blue.Namespace), metav1.GetOptions{}); err != nil {
			t.Errorf("blue's queue reader after red's revocation: %v", err)
		}
	})
}
