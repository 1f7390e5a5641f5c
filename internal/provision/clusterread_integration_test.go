package provision_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func clusterReader(t *testing.T) (*provision.ClusterReader, dynamic.Interface) {
	t.Helper()
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	r, err := provision.NewClusterReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, dyn
}

// The readiness check reads the Kueue versions the real API server serves:
// the test bed's Kueue CRDs serve kueue.x-k8s.io/v1beta2, and a version no
// CRD serves is reported failing, naming the add-on version needed.
func TestKueueReadinessIntegration(t *testing.T) {
	r, _ := clusterReader(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	served, err := r.Served(ctx, "kueue.x-k8s.io")
	if err != nil || !slices.Contains(served, "v1beta2") {
		t.Fatalf("Served(kueue) = %v, %v; want v1beta2 among them", served, err)
	}
	if v, err := r.Served(ctx, "no-such-group.example.test"); err != nil || len(v) != 0 {
		t.Errorf("Served(unknown group) = %v, %v", v, err)
	}

	rd := provision.CheckReadiness(ctx, provision.ReadinessSources{Kube: r})
	if c, _ := rd.Check(provision.CheckKueueAPI); c.Status != provision.CheckOK || !rd.KueueServed {
		t.Errorf("with v1beta2 served: %+v", c)
	}
	absent := schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1alpha9"}
	rd = provision.CheckReadiness(ctx, provision.ReadinessSources{Kube: r, Kueue: absent})
	c, _ := rd.Check(provision.CheckKueueAPI)
	if c.Status != provision.CheckFailing || rd.KueueServed || !strings.Contains(c.Detail, "v1beta2") ||
		!strings.Contains(c.Todo, "amazon-sagemaker-hyperpod-taskgovernance") || !strings.Contains(c.Todo, provision.KueueAddonVersion) {
		t.Errorf("with %s absent: %+v", absent, c)
	}
}

// A plan needing a Kueue version the cluster does not serve fails its job
// permanently before anything is applied, with a message naming the add-on
// version needed; the same worker provisions a plan the cluster serves.
func TestWorkerRefusesUnservedKueueIntegration(t *testing.T) {
	b := newWBed(t)
	r, _ := clusterReader(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b.setInventory(ctx, 2)
	// The plans of this tenant apply their LocalQueue as a Kueue version
	// that no CRD of the test bed serves, as on a cluster whose add-on
	// ships an older Kueue.
	old := func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		p, err := b.plans(ctx, id, v)
		for i, o := range p.Objects {
			if o.Kind == "LocalQueue" {
				o.Obj = o.Obj.DeepCopy()
				o.Obj.SetAPIVersion("kueue.x-k8s.io/v1alpha9")
				p.Objects[i] = o
			}
		}
		return p, err
	}
	tn := b.approve(ctx, "wold"+wintRandom(t), old)
	w := b.worker("w1")
	w.Plans = old
	w.Preflight = r.RequireServed
	b.runOnce(ctx, w)
	j := b.job(ctx, tn.job.ID)
	if j.State != workflow.JobFailed || j.Attempts != 1 {
		t.Errorf("job = %s after %d attempts, want failed at once", j.State, j.Attempts)
	}
	for _, want := range []string{"does not serve kueue.x-k8s.io/v1alpha9", "v1beta2", "amazon-sagemaker-hyperpod-taskgovernance", provision.KueueAddonVersion} {
		if !strings.Contains(j.LastError, want) {
			t.Errorf("the job's error lacks %q: %s", want, j.LastError)
		}
	}
	if steps := b.steps(ctx, tn.job.ID); len(steps) != 0 {
		t.Errorf("%d steps recorded; nothing may be applied", len(steps))
	}
	if _, err := b.live(ctx, tn.plan.Objects[0]); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v; want it never created", tn.plan.Objects[0].Name, err)
	}

	// The same preflight lets a served plan through.
	ok := b.approve(ctx, "wnew"+wintRandom(t), b.plans)
	w.Plans = b.plans
	b.runOnce(ctx, w)
	if j := b.job(ctx, ok.job.ID); j.State != workflow.JobSucceeded {
		t.Errorf("served plan: job %s (%s)", j.State, j.LastError)
	}
}

// The network policy check reads DaemonSet kube-system/aws-node: absent, an
// agent without --enable-network-policy=true, and one with it.
func TestNetworkPolicyEnforcementIntegration(t *testing.T) {
	r, dyn := clusterReader(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	check := func(want provision.CheckStatus, detail string) {
		t.Helper()
		rd := provision.CheckReadiness(ctx, provision.ReadinessSources{Kube: r})
		c, _ := rd.Check(provision.CheckNetworkPolicies)
		if c.Status != want || !strings.Contains(c.Detail, detail) || rd.NetworkPoliciesEnforced != (want == provision.CheckOK) {
			t.Errorf("network policies = %+v, want %s with %q", c, want, detail)
		}
		if want != provision.CheckOK && !strings.Contains(c.Todo, `"enableNetworkPolicy": "true"`) {
			t.Errorf("no advice: %+v", c)
		}
	}
	dsets := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}).Namespace("kube-system")
	_ = dsets.Delete(ctx, "aws-node", metav1.DeleteOptions{})
	check(provision.CheckFailing, "does not exist")

	ds := func(arg string) *unstructured.Unstructured {
		labels := map[string]any{"k8s-app": "aws-node"}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "DaemonSet",
			"metadata": map[string]any{"name": "aws-node", "namespace": "kube-system"},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						// No node matches: the DaemonSet runs nowhere.
						"nodeSelector": map[string]any{"portal-test/none": "none"},
						"containers": []any{
							map[string]any{"name": "aws-node", "image": "example.test/amazon-k8s-cni:v1.19.0"},
							map[string]any{"name": "aws-network-policy-agent", "image": "example.test/aws-network-policy-agent:v1.2.0",
								"args": []any{arg, "--metrics-bind-addr=:8162"}},
						},
					},
				},
			},
		}}
	}
	if _, err := dsets.Create(ctx, ds("--enable-network-policy=false"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = dsets.Delete(ctx, "aws-node", metav1.DeleteOptions{})
	})
	check(provision.CheckFailing, "without --enable-network-policy=true")

	on := ds("--enable-network-policy=true")
	live, err := dsets.Get(ctx, "aws-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	on.SetResourceVersion(live.GetResourceVersion())
	if _, err := dsets.Update(ctx, on, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check(provision.CheckOK, "Enforced")
}

// The inventory read from the cluster: nodes by instance type and HyperPod
// health on the real API server, instance groups from the SageMaker test
// endpoint; capacity is the healthy schedulable nodes.
func TestReadInventoryIntegration(t *testing.T) {
	r, dyn := clusterReader(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Instance types of this run only, so other nodes do not count.
	gpu, cpu := "ml.x"+wintRandom(t)+".48xlarge", "ml.y"+wintRandom(t)+".8xlarge"
	nodes := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"})
	mk := func(name, typ, health string, cordoned bool) {
		t.Helper()
		labels := map[string]any{}
		if typ != "" {
			labels[provision.LabelInstanceType] = typ
		}
		if health != "" {
			labels[provision.LabelNodeHealth] = health
		}
		n := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec":     map[string]any{"unschedulable": cordoned},
		}}
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete node %s: %v", name, err)
			}
		})
	}
	id := wintRandom(t)
	mk("hp-"+id+"-1", gpu, provision.HealthSchedulable, false)
	mk("hp-"+id+"-2", gpu, provision.HealthSchedulable, false)
	mk("hp-"+id+"-3", gpu, provision.HealthSchedulable, true) // cordoned
	mk("hp-"+id+"-4", gpu, provision.HealthUnschedulablePendingReboot, false)
	mk("hp-"+id+"-5", gpu, "", false) // no health label yet
	mk("hp-"+id+"-6", cpu, provision.HealthUnschedulablePendingReplacement, false)
	mk("hp-"+id+"-7", "", provision.HealthSchedulable, false) // no instance type

	counts, err := r.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]provision.NodeCount{}
	for _, c := range counts {
		byType[c.InstanceType] = c
	}
	if g := byType[gpu]; g.Total != 5 || g.Schedulable != 2 || g.ByHealth[provision.HealthSchedulable] != 3 || g.ByHealth[provision.HealthUnschedulablePendingReboot] != 1 || g.ByHealth[""] != 1 {
		t.Errorf("%s = %+v", gpu, g)
	}
	if c := byType[cpu]; c.Total != 1 || c.Schedulable != 0 {
		t.Errorf("%s = %+v", cpu, c)
	}

	sm := awstest.NewSageMaker(t)
	hp := awstest.HyperPodCluster{Name: "shared-hp", ID: "a1b2c3d4e5f6", Groups: []awstest.InstanceGroup{
		{Name: "gpu-a", InstanceType: smtypes.ClusterInstanceTypeMlP548xlarge, CurrentCount: 4, TargetCount: 4},
	}}
	sm.AddHyperPodCluster(hp)
	client := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	checker := &provision.ClusterChecker{Sources: provision.ReadinessSources{Kube: r, ClusterInfo: client, ClusterARN: hp.ARN()}}
	inv, err := checker.ReadInventory(ctx, "shared-hp")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]provision.ObservedType{}
	for _, ty := range inv.Types {
		got[ty.InstanceType] = ty
	}
	if g := got[gpu]; inv.Cluster != "shared-hp" || g.Capacity != 2 || g.Basis != provision.BasisNodes || g.Nodes != 5 || g.GroupCurrent != -1 {
		t.Errorf("%s = %+v", gpu, g)
	}
	// An instance group without nodes on the cluster has no capacity.
	if p5 := got["ml.p5.48xlarge"]; p5.Capacity != 0 || p5.GroupCurrent != 4 || p5.GroupTarget != 4 || p5.Nodes != 0 {
		t.Errorf("ml.p5.48xlarge = %+v", p5)
	}
	if _, err := checker.ReadInventory(ctx, "another-hp"); err == nil || !strings.Contains(err.Error(), "is shared-hp, not another-hp") {
		t.Errorf("a cluster other than the portal's: %v", err)
	}
	// Without the cluster, the instance groups' CurrentCount is the basis.
	checker.Sources.Kube = nil
	if inv, err := checker.ReadInventory(ctx, ""); err != nil || len(inv.Types) != 1 || inv.Types[0].Capacity != 4 || inv.Types[0].Basis != provision.BasisGroups {
		t.Errorf("from instance groups only = %+v, %v", inv, err)
	}
	checker.Sources.ClusterInfo = nil
	if _, err := checker.ReadInventory(ctx, "shared-hp"); !errors.Is(err, provision.ErrNothingToRead) {
		t.Errorf("with nothing to read: %v", err)
	}
}
