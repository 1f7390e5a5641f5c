package provision

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var tenants = flag.Int("tenants", 20, "number of tenants TestApplyManyTenants provisions")

// testbedConfig is the admin config of the test bed, with client-side rate
// limits high enough that the figures measure the API server, not
// client-go's default 5 requests per second.
func testbedConfig(t testing.TB) *rest.Config {
	t.Helper()
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// userConfig is cfg as a token user of the test bed.
func userConfig(t *testing.T, cfg *rest.Config, user string) *rest.Config {
	t.Helper()
	dir := testenv.Require(t, "PORTAL_TEST_KUBE_TOKENS_DIR")
	token, err := os.ReadFile(filepath.Join(dir, user))
	if err != nil {
		t.Fatalf("token of %s: %v", user, err)
	}
	u := rest.AnonymousClientConfig(cfg)
	u.BearerToken = strings.TrimSpace(string(token))
	return u
}

// countRequests counts the requests of a client (see testenv.RequestCounter).
func countRequests(cfg *rest.Config) (*rest.Config, *testenv.RequestCounter) {
	return testenv.CountRequests(cfg)
}

func runID(t testing.TB) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// itSettings keep one run's cluster-scoped names apart from other runs' and
// other packages' on the same test bed. The shared objects
// (WorkloadPriorityClasses, ResourceFlavors) keep their names: they are the
// same for everyone.
func itSettings(run string) ClusterSettings {
	s := DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = true
	s.Cohort = "it-" + run
	s.ClusterQueueNameFormat = "it-" + run + "-%s-clusterqueue"
	return s
}

func itContract(team, ns string) workflow.Contract {
	c := workflow.ExampleContract()
	c.Team = team
	c.Namespaces = []string{ns}
	c.WorkloadRoleARN = "arn:aws:iam::111122223333:role/" + team + "-workload"
	return c.Normalize()
}

func mustPlan(t testing.TB, connID int64, c workflow.Contract, s ClusterSettings) Plan {
	t.Helper()
	p, err := BuildPlan(connID, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deleteAfter removes the plans' namespaces and ClusterQueues when the test
// ends, without waiting for the namespaces to finish terminating.
func deleteAfter(t testing.TB, dyn dynamic.Interface, plans ...Plan) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range plans {
			for _, o := range p.Objects {
				var gvr schema.GroupVersionResource
				switch o.Kind {
				case "Namespace":
					gvr = corev1.SchemeGroupVersion.WithResource("namespaces")
				case "ClusterQueue":
					gvr = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
				case "ClusterRole", "ClusterRoleBinding": // named after the run's namespace
					gvr = rbacv1.SchemeGroupVersion.WithResource(strings.ToLower(o.Kind) + "s")
				default:
					continue
				}
				if err := dyn.Resource(gvr).Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("cleanup: delete %s %s: %v", o.Kind, o.Name, err)
				}
			}
		}
	})
}

func liveObject(ctx context.Context, a *Applier, o Object) (*unstructured.Unstructured, error) {
	ri, err := a.resourceOf(o)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, o.Name, metav1.GetOptions{})
}

func outcomes(rs []StepResult) map[Outcome]int {
	out := map[Outcome]int{}
	for _, r := range rs {
		out[r.Outcome]++
	}
	return out
}

// TestProvisionIntegration applies the example plan for teams red and blue
// to the test bed's real kube-apiserver and checks that it is idempotent,
// that the quota, RBAC and Kueue objects really work, and how errors are
// classified.
func TestProvisionIntegration(t *testing.T) {
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	counted, counter := countRequests(cfg)
	a, err := NewApplier(counted)
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
		results, err := a.Apply(ctx, p)
		if err != nil {
			t.Fatalf("apply %s: %v", p.Team, err)
		}
		for _, r := range results {
			shared := slices.ContainsFunc(p.Objects, func(o Object) bool { return o.Shared && o.Kind == r.Kind && o.Name == r.Name })
			// Shared objects may exist from an earlier run or the other team.
			if !shared && r.Outcome != Created {
				t.Errorf("first apply of %s: %s %s/%s %s, want created", p.Team, r.Kind, r.Namespace, r.Name, r.Outcome)
			}
		}
		t.Logf("first apply of %s: %d objects, %v", p.Team, len(results), outcomes(results))
	}

	t.Run("every object exists with its labels", func(t *testing.T) {
		for _, p := range []Plan{red, blue} {
			for _, o := range p.Objects {
				live, err := liveObject(ctx, a, o)
				if err != nil {
					t.Errorf("get %s %s: %v", o.Kind, o.Ref(), err)
					continue
				}
				for k, v := range o.Obj.GetLabels() {
					if live.GetLabels()[k] != v {
						t.Errorf("%s %s: label %s = %q, want %q", o.Kind, o.Ref(), k, live.GetLabels()[k], v)
					}
				}
				if want := o.Obj.GetAnnotations()[AnnotationContractHash]; live.GetAnnotations()[AnnotationContractHash] != want {
					t.Errorf("%s %s: hash annotation %q, want %q", o.Kind, o.Ref(), live.GetAnnotations()[AnnotationContractHash], want)
				}
			}
		}
	})

	t.Run("applying again writes nothing", func(t *testing.T) {
		counter.Reset()
		var results []StepResult
		for _, p := range []Plan{red, blue} {
			rs, err := a.Apply(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, rs...)
		}
		byMethod, total, writes := counterSnapshot(counter)
		if got := outcomes(results); got[Unchanged] != len(results) {
			t.Errorf("re-apply outcomes %v, want all %d unchanged", got, len(results))
		}
		if writes != 0 {
			t.Errorf("re-apply wrote %d times, want 0", writes)
		}
		t.Logf("re-apply of 2 plans: %d objects unchanged, %d requests %v, %d writes", len(results), total, byMethod, writes)
	})

	t.Run("quota rejects a pod over it", func(t *testing.T) {
		ns := red.Namespace
		// Quota admission refuses every pod until the controller has
		// computed the quota's status.
		var quota *corev1.ResourceQuota
		for {
			quota, err = admin.CoreV1().ResourceQuotas(ns).Get(ctx, NameResourceQuota, metav1.GetOptions{})
			if err == nil && len(quota.Status.Hard) > 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("quota status never computed (is kube-controller-manager running?): %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		hard := quota.Status.Hard[corev1.ResourceName("requests."+ResourceNvidiaGPU)]
		if hard.Value() != 24 {
			t.Fatalf("GPU quota %s, want 24 (2 × 8 GPUs + 50%% borrowing)", hard.String())
		}
		pod := func(name string, gpus int64) *corev1.Pod {
			q := *resource.NewQuantity(gpus, resource.DecimalSI)
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{
					ServiceAccountName: "red-workloads",
					RestartPolicy:      corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "train", Image: "busybox",
						// No cpu or memory: the LimitRange must fill them in,
						// or the quota would reject the pod for that.
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{ResourceNvidiaGPU: q},
							Limits:   corev1.ResourceList{ResourceNvidiaGPU: q},
						},
					}},
				},
			}
		}
		_, err := admin.CoreV1().Pods(ns).Create(ctx, pod("over-quota", 25), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), "requests.nvidia.com/gpu") {
			t.Fatalf("pod with 25 GPUs: error %v, want Forbidden: exceeded quota on requests.nvidia.com/gpu", err)
		}
		t.Logf("rejected: %v", err)

		ok, err := admin.CoreV1().Pods(ns).Create(ctx, pod("within-quota", 8), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod with 8 GPUs, within the quota: %v", err)
		}
		defer admin.CoreV1().Pods(ns).Delete(context.Background(), ok.Name, metav1.DeleteOptions{})
		req := ok.Spec.Containers[0].Resources.Requests
		if req.Cpu().String() != "500m" || req.Memory().String() != "1Gi" {
			t.Errorf("LimitRange defaults: pod requests cpu=%s memory=%s, want 500m and 1Gi", req.Cpu(), req.Memory())
		}
	})

	t.Run("rbac", func(t *testing.T) {
		clients := map[string]*kubernetes.Clientset{}
		for _, user := range []string{"viewer-red", "submitter-red", "viewer-blue"} {
			c, err := kubernetes.NewForConfig(userConfig(t, cfg, user))
			if err != nil {
				t.Fatal(err)
			}
			clients[user] = c
		}
		job := func(name string) *batchv1.Job {
			suspend := true
			return &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": red.Namespace + "-localqueue"}},
				Spec: batchv1.JobSpec{
					Suspend: &suspend,
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "train", Image: "busybox"}},
					}},
				},
			}
		}
		check := func(what string, err error, wantForbidden bool) {
			t.Helper()
			switch {
			case wantForbidden && !apierrors.IsForbidden(err):
				t.Errorf("%s: error %v, want Forbidden", what, err)
			case !wantForbidden && err != nil:
				t.Errorf("%s: %v, want it allowed", what, err)
			}
		}
		_, err := clients["viewer-red"].BatchV1().Jobs(red.Namespace).List(ctx, metav1.ListOptions{})
		check("viewer-red lists jobs in red", err, false)
		_, err = clients["viewer-red"].CoreV1().Pods(red.Namespace).List(ctx, metav1.ListOptions{})
		check("viewer-red lists pods in red", err, false)
		_, err = clients["viewer-red"].BatchV1().Jobs(red.Namespace).Create(ctx, job("by-viewer"), metav1.CreateOptions{})
		check("viewer-red creates a job in red", err, true)
		_, err = clients["viewer-red"].BatchV1().Jobs(blue.Namespace).List(ctx, metav1.ListOptions{})
		check("viewer-red lists jobs in blue", err, true)

		created, err := clients["submitter-red"].BatchV1().Jobs(red.Namespace).Create(ctx, job("by-submitter"), metav1.CreateOptions{})
		check("submitter-red creates a job in red", err, false)
		if err == nil && created.Labels["kueue.x-k8s.io/queue-name"] == "" {
			t.Errorf("created job lost its queue label")
		}
		_, err = clients["submitter-red"].BatchV1().Jobs(red.Namespace).List(ctx, metav1.ListOptions{})
		check("submitter-red lists jobs in red", err, false)
		_, err = clients["submitter-red"].CoreV1().Pods(red.Namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "bare"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		check("submitter-red creates a bare pod (bypassing the queue)", err, true)
		_, err = clients["submitter-red"].BatchV1().Jobs(blue.Namespace).Create(ctx, job("in-blue"), metav1.CreateOptions{})
		check("submitter-red creates a job in blue", err, true)

		_, err = clients["viewer-blue"].BatchV1().Jobs(blue.Namespace).List(ctx, metav1.ListOptions{})
		check("viewer-blue lists jobs in blue", err, false)
		_, err = clients["viewer-blue"].BatchV1().Jobs(red.Namespace).List(ctx, metav1.ListOptions{})
		check("viewer-blue lists jobs in red", err, true)

		viewerDyn, err := dynamic.NewForConfig(userConfig(t, cfg, "viewer-red"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"workloads", "localqueues"} {
			_, err = viewerDyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}).Namespace(red.Namespace).List(ctx, metav1.ListOptions{})
			check("viewer-red lists kueue "+r+" in red", err, false)
		}
	})

	t.Run("kueue CRDs accept the queues and reject an invalid one", func(t *testing.T) {
		var cq, lq Object
		for _, o := range red.Objects {
			switch o.Kind {
			case "ClusterQueue":
				cq = o
			case "LocalQueue":
				lq = o
			}
		}
		live, err := liveObject(ctx, a, cq)
		if err != nil {
			t.Fatal(err)
		}
		// Defaults from the CRD's schema show the server processed it.
		if got, _, _ := unstructured.NestedString(live.Object, "spec", "queueingStrategy"); got != "BestEffortFIFO" {
			t.Errorf("ClusterQueue queueingStrategy = %q, want the schema default BestEffortFIFO", got)
		}
		if got, _, _ := unstructured.NestedString(live.Object, "spec", "cohortName"); got != s.Cohort {
			t.Errorf("ClusterQueue cohort = %q, want %q", got, s.Cohort)
		}
		live, err = liveObject(ctx, a, lq)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(live.Object, "spec", "clusterQueue"); got != cq.Name {
			t.Errorf("LocalQueue points at %q, want %q", got, cq.Name)
		}

		// Kueue's CRD forbids a borrowing limit outside a cohort.
		bad := cq
		bad.Name = "it-" + run + "-invalid-clusterqueue"
		bad.Obj = cq.Obj.DeepCopy()
		bad.Obj.SetName(bad.Name)
		unstructured.RemoveNestedField(bad.Obj.Object, "spec", "cohortName")
		_, err = a.Apply(ctx, Plan{Objects: []Object{bad}})
		if !apierrors.IsInvalid(err) || !IsPermanent(err) || !strings.Contains(err.Error(), "borrowingLimit must be nil when cohort is empty") {
			t.Errorf("ClusterQueue with a borrowing limit and no cohort: error %v, want a permanent Invalid naming the rule", err)
		}
		t.Logf("rejected: %v", err)
	})

	t.Run("errors are classified", func(t *testing.T) {
		cm := func(ns, name string) Object {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind("ConfigMap")
			u.SetNamespace(ns)
			u.SetName(name)
			return Object{Kind: "ConfigMap", Namespace: ns, Name: name, Obj: u}
		}
		pytorch := &unstructured.Unstructured{}
		pytorch.SetAPIVersion("kubeflow.org/v1")
		pytorch.SetKind("PyTorchJob")
		pytorch.SetNamespace(red.Namespace)
		pytorch.SetName("train")
		for _, tc := range []struct {
			name      string
			o         Object
			permanent bool
			is        func(error) bool
		}{
			{"a name the API server rejects", cm(red.Namespace, "Not_A_Name"), true, apierrors.IsInvalid},
			{"a kind the cluster does not serve", Object{Kind: "PyTorchJob", Namespace: red.Namespace, Name: "train", Obj: pytorch}, true, meta.IsNoMatchError},
			{"a namespace that does not exist (yet)", cm("it-"+run+"-missing", "c"), false, apierrors.IsNotFound},
		} {
			_, err := a.Apply(ctx, Plan{Objects: []Object{tc.o}})
			if !tc.is(err) || IsPermanent(err) != tc.permanent {
				t.Errorf("%s: error %v (permanent %v), want permanent=%v", tc.name, err, IsPermanent(err), tc.permanent)
			}
		}
	})
}

// TestApplyManyTenants provisions -tenants teams, then reconciles them all
// again with nothing changed: the second pass must write nothing.
func TestApplyManyTenants(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	cfg := testbedConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	counted, counter := countRequests(cfg)
	a, err := NewApplier(counted)
	if err != nil {
		t.Fatal(err)
	}
	run := runID(t)
	s := itSettings(run)
	var plans []Plan
	for i := range *tenants {
		team := fmt.Sprintf("t%03d", i)
		c := itContract(team, fmt.Sprintf("it-%s-%s", run, team))
		if i%2 == 1 { // vary the shape: two instance types, borrowing, a CIDR
			c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 4}, {InstanceType: "ml.p4d.24xlarge", Count: 1}}
			c.Scheduling.Sharing, c.Scheduling.BorrowLimitPercent = workflow.SharingBorrow, 100
			c.EgressAllowances = append(c.EgressAllowances, workflow.Egress{Destination: "10.20.0.0/16", Ports: []int{443}, Reason: "data"})
			c = c.Normalize()
		}
		plans = append(plans, mustPlan(t, int64(i+1), c, s))
	}
	deleteAfter(t, a.Client, plans...)
	// Discovery happens once per Applier; keep it out of the figures.
	if _, err := a.Mapper.RESTMapping(schema.GroupKind{Kind: "Namespace"}, "v1"); err != nil {
		t.Fatal(err)
	}
	objects := 0
	for _, p := range plans {
		objects += len(p.Objects)
	}

	pass := func(name string) (map[Outcome]int, time.Duration) {
		counter.Reset()
		start := time.Now()
		all := map[Outcome]int{}
		for _, p := range plans {
			results, err := a.Apply(ctx, p)
			if err != nil {
				t.Fatalf("%s, tenant %s: %v", name, p.Team, err)
			}
			for k, v := range outcomes(results) {
				all[k] += v
			}
		}
		elapsed := time.Since(start)
		byMethod, total, writes := counterSnapshot(counter)
		t.Logf("%s: %d tenants, %d objects in %v (%.1f ms per tenant): outcomes %v; %d requests %v; %d writes",
			name, len(plans), objects, elapsed.Round(time.Millisecond), float64(elapsed.Microseconds())/1000/float64(len(plans)), all, total, byMethod, writes)
		return all, elapsed
	}

	first, _ := pass("first apply")
	if first[Created]+first[Unchanged]+first[Configured] != objects {
		t.Errorf("first apply outcomes %v for %d objects", first, objects)
	}
	second, _ := pass("re-apply")
	if second[Unchanged] != objects {
		t.Errorf("re-apply outcomes %v, want all %d unchanged", second, objects)
	}
	if _, _, writes := counterSnapshot(counter); writes != 0 {
		t.Errorf("re-apply wrote %d times, want 0", writes)
	}
}

// counterSnapshot is the requests by method, their total and the writes.
func counterSnapshot(c *testenv.RequestCounter) (map[string]int, int, int) {
	byMethod, total, _, writes := c.Counts()
	return byMethod, total, writes
}
