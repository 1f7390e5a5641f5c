package provision_test

// The team's ClusterQueue on the test bed's real API server (issue 31 item
// 6): three connections of one team, each in a namespace of its own, are
// provisioned, one is amended, and all three revoked, by the worker with
// the production's team queue lookup (store.DB.TeamQueueVersions through
// provision.TeamQueuesFrom); after each job the one ClusterQueue of the
// team sums the counted connections' guarantees, selects each of their
// namespaces and none revoked, and carries the team's labels, never a
// connection's. Skips without the test bed (worker_integration_test.go's
// wbed).

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// teamQueueOf is the production's team queue lookup on the bed's store.
func (b *wbed) teamQueueOf() func(context.Context, provision.Plan, bool) (provision.Plan, error) {
	return provision.TeamQueuesFrom(func(ctx context.Context, team, cluster string, except int64) ([]provision.QueueShare, error) {
		vs, err := b.db.TeamQueueVersions(ctx, team, cluster, except)
		out := make([]provision.QueueShare, len(vs))
		for i, v := range vs {
			out[i] = provision.QueueShare{ConnectionID: v.ConnectionID, Scheduling: v.Contract.Scheduling}
		}
		return out, err
	}, b.settings)
}

func TestTeamQueueOfThreeConnectionsIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := newWBed(t)
	b.setInventory(ctx, 4) // 8 p5 instances: the three ask 1, 2 and 1, then 3 instead of 2
	team := "wint" + wintRandom(t)
	worker := func(owner string) *provision.Worker {
		w := b.worker(owner)
		w.TeamQueue = b.teamQueueOf()
		return w
	}
	const gpusPerP5 = 8 // ml.p5.48xlarge (the accelerator table)
	if per := b.settings.Accelerators["ml.p5.48xlarge"].Accelerators; per != gpusPerP5 {
		t.Fatalf("the table gives ml.p5.48xlarge %d GPUs, the test expects %d", per, gpusPerP5)
	}
	namespaces := []string{provision.DefaultNamespacePrefix + team, team + "-b", team + "-c"}
	counts := []int{1, 2, 1}
	tns, queue := b.provisionTeam(ctx, team, namespaces, counts, func(i int, tns []wintTenant, queue provision.Object) {
		b.assertTeamQueue(ctx, queue, team, tns, counts[:i+1], "after provisioning connection "+strconv.Itoa(i+1))
	})

	// Amend the second connection: 3 instances instead of 2.
	job, _ := amendment(t, b.db, b.clock.Now(), b.plans, tns[1].conn.ID, func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 3 })
	b.runOnce(ctx, worker("amend"))
	if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("amend job %+v, want succeeded", j)
	}
	counts[1] = 3
	b.assertTeamQueue(ctx, queue, team, tns, counts, "after amending connection 2")

	// Revoke them one by one: the queue loses each share, and goes with
	// the last.
	for len(tns) > 0 {
		tn := tns[0]
		if _, _, err := b.db.Revoke(ctx, tn.conn.ID, b.admin, "the project ended", b.clock.Now()); err != nil {
			t.Fatal(err)
		}
		b.runOnce(ctx, worker("revoke"))
		if s := b.state(ctx, tn.conn.ID); s != workflow.StateRevoked {
			t.Fatalf("connection %d is %s after its revocation, want revoked", tn.conn.ID, s)
		}
		tns, counts = tns[1:], counts[1:]
		what := "after revoking connection " + strconv.FormatInt(tn.conn.ID, 10)
		if len(tns) == 0 {
			if _, err := b.live(ctx, queue); !apierrors.IsNotFound(err) {
				t.Errorf("%s, the team's last: the ClusterQueue is still there (%v), want it deleted", what, err)
			}
			break
		}
		b.assertTeamQueue(ctx, queue, team, tns, counts, what)
		b.assertNotSelected(ctx, queue, tn.plan.Namespace, what)
	}
}

// provisionTeam approves and provisions one connection of team per
// namespace, guaranteed counts[i] ml.p5.48xlarge instances each, with the
// production's team queue lookup; after each, each (when set) gets the
// connections so far and the team's ClusterQueue.
func (b *wbed) provisionTeam(ctx context.Context, team string, namespaces []string, counts []int, each func(i int, tns []wintTenant, queue provision.Object)) ([]wintTenant, provision.Object) {
	b.tb.Helper()
	var tns []wintTenant
	var queue provision.Object
	for i, ns := range namespaces {
		b.edit = func(c *workflow.Contract) {
			c.Namespaces = []string{ns}
			c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: counts[i]}}
			n := strconv.Itoa(i)
			c.ProjectRoleARN += n
			c.AccessRoleARN += n
			c.WorkloadRoleARN += n
		}
		tn := b.approve(ctx, team, b.plans)
		b.edit = nil
		w := b.worker("w" + strconv.Itoa(i))
		w.TeamQueue = b.teamQueueOf()
		b.runOnce(ctx, w)
		if s := b.state(ctx, tn.conn.ID); s != workflow.StateActive {
			b.tb.Fatalf("connection %d is %s after its job, want active", tn.conn.ID, s)
		}
		tns = append(tns, tn)
		queue = teamQueueObject(b.tb, tn.plan)
		if each != nil {
			each(i, tns, queue)
		}
	}
	return tns, queue
}

// teamQueueObject is the plan's team ClusterQueue.
func teamQueueObject(tb testing.TB, p provision.Plan) provision.Object {
	tb.Helper()
	for _, o := range p.Objects {
		if o.Kind == "ClusterQueue" && o.Team {
			return o
		}
	}
	tb.Fatal("the plan has no team ClusterQueue")
	return provision.Object{}
}

// assertTeamQueue checks the live team ClusterQueue against the counted
// connections tns (with their instance counts): its GPU nominal quota is
// the sum, computed here from the counts; it names exactly those
// connections; it carries the team's labels and no connection's; and its
// namespaceSelector selects every one of their namespaces as they are
// labelled on the cluster.
func (b *wbed) assertTeamQueue(ctx context.Context, queue provision.Object, team string, tns []wintTenant, counts []int, what string) {
	b.tb.Helper()
	live, err := b.live(ctx, queue)
	if err != nil {
		b.tb.Fatalf("%s: the team's ClusterQueue: %v", what, err)
	}
	sum := 0
	var ids []string
	for i, tn := range tns {
		sum += counts[i]
		ids = append(ids, strconv.FormatInt(tn.conn.ID, 10))
	}
	slices.Sort(ids)
	if got := gpuNominal(b.tb, live); got != int64(sum*8) {
		b.tb.Errorf("%s: GPU nominal quota %d, want %d (%d instances × 8)", what, got, sum*8, sum)
	}
	if got := live.GetAnnotations()[provision.AnnotationTeamConnections]; got != strings.Join(ids, ",") {
		b.tb.Errorf("%s: the queue sums connections %q, want %q", what, got, strings.Join(ids, ","))
	}
	l := live.GetLabels()
	if l[provision.LabelTeam] != team || l[provision.LabelManagedBy] != provision.ManagedBy || l[provision.LabelConnection] != "" || l[provision.LabelContractVersion] != "" {
		b.tb.Errorf("%s: the queue's labels %v, want the team's and no connection's", what, l)
	}
	sel := b.selectorOf(live)
	for _, tn := range tns {
		ns, err := b.look.Client.Resource(nsGVR).Get(ctx, tn.plan.Namespace, metav1.GetOptions{})
		if err != nil {
			b.tb.Fatalf("%s: namespace %s: %v", what, tn.plan.Namespace, err)
		}
		if !sel.Matches(labels.Set(ns.GetLabels())) {
			b.tb.Errorf("%s: the queue's namespaceSelector %s does not select %s (labels %v), whose LocalQueue points at it", what, sel, tn.plan.Namespace, ns.GetLabels())
		}
	}
}

// assertNotSelected checks that the queue no longer selects a revoked
// connection's (locked) namespace.
func (b *wbed) assertNotSelected(ctx context.Context, queue provision.Object, ns, what string) {
	b.tb.Helper()
	live, err := b.live(ctx, queue)
	if err != nil {
		b.tb.Fatal(err)
	}
	got, err := b.look.Client.Resource(nsGVR).Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		b.tb.Fatal(err)
	}
	if b.selectorOf(live).Matches(labels.Set(got.GetLabels())) && got.GetDeletionTimestamp() == nil {
		b.tb.Errorf("%s: the queue still selects the revoked namespace %s (labels %v)", what, ns, got.GetLabels())
	}
}

func (b *wbed) selectorOf(live *unstructured.Unstructured) labels.Selector {
	b.tb.Helper()
	m, _, _ := unstructured.NestedMap(live.Object, "spec", "namespaceSelector")
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls); err != nil {
		b.tb.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		b.tb.Fatal(err)
	}
	return sel
}

// gpuNominal is the queue's nominal quota of nvidia.com/gpu, summed over
// its flavors.
func gpuNominal(tb testing.TB, live *unstructured.Unstructured) int64 {
	tb.Helper()
	groups, _, _ := unstructured.NestedSlice(live.Object, "spec", "resourceGroups")
	var n int64
	for _, g := range groups {
		for _, f := range g.(map[string]any)["flavors"].([]any) {
			for _, r := range f.(map[string]any)["resources"].([]any) {
				rm := r.(map[string]any)
				if rm["name"] == "nvidia.com/gpu" {
					q, err := resource.ParseQuantity(rm["nominalQuota"].(string))
					if err != nil {
						tb.Fatal(err)
					}
					n += q.Value()
				}
			}
		}
	}
	return n
}

// nsGVR is the namespaces resource.
var nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// TestTeamQueueRaceIntegration: two jobs of one team interleave as two
// replicas' workers can. Connection 1's re-apply reads the team's
// connections (connection 2 at 1 instance); before it applies, connection
// 2's amendment to 3 instances is approved and its job runs to the end
// (it applies 1+3). Connection 1's job then applies the sum it read
// (1+1): without settleTeamQueue's re-read the cluster would keep it,
// below what the store approved. The queue must end at 1+3.
func TestTeamQueueRaceIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := newWBed(t)
	b.setInventory(ctx, 4)
	team := "wrace" + wintRandom(t)
	namespaces := []string{provision.DefaultNamespacePrefix + team, team + "-b"}
	counts := []int{1, 1}
	tns, queue := b.provisionTeam(ctx, team, namespaces, counts, nil)
	b.assertTeamQueue(ctx, queue, team, tns, counts, "after provisioning both")

	reapply, err := b.db.EnqueueReapply(ctx, tns[0].conn.ID, b.admin, "race", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var amend workflow.Job
	interleaved := false
	slow := b.worker("slow")
	real := b.teamQueueOf()
	slow.TeamQueue = func(ctx context.Context, p provision.Plan, withSelf bool) (provision.Plan, error) {
		read, err := real(ctx, p, withSelf) // the read this job applies
		if !interleaved {
			interleaved = true
			amend, _ = amendment(t, b.db, b.clock.Now(), b.plans, tns[1].conn.ID, func(c *workflow.Contract) { c.Scheduling.Guaranteed[0].Count = 3 })
			fast := b.worker("fast")
			fast.TeamQueue = real
			b.runOnce(ctx, fast)
			if j := b.job(ctx, amend.ID); j.State != workflow.JobSucceeded {
				t.Fatalf("the amendment's job %+v, want succeeded", j)
			}
		}
		return read, err
	}
	b.runOnce(ctx, slow)
	if !interleaved {
		t.Fatal("the re-apply never looked the team's connections up: the race was not played")
	}
	j := b.job(ctx, reapply.ID)
	if j.State != workflow.JobSucceeded {
		t.Fatalf("the re-apply job %+v, want succeeded", j)
	}
	counts[1] = 3
	b.assertTeamQueue(ctx, queue, team, tns, counts, "after the interleaved re-apply and amendment")
}
