package provision

import (
	"context"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// teamShares are three connections of team red (issue 31 item 6): 3 is the
// example contract (2 × p5, lends and borrows 50%, LowerPriority, weight
// 50); 1 adds a p5 and 4 g5s and borrows 100%; 2 has 2 g5s, neither lends
// nor borrows and asks never to be preempted.
func teamShares() (self workflow.Contract, others []QueueShare) {
	self = workflow.ExampleContract()
	return self, []QueueShare{
		{ConnectionID: 1, Scheduling: workflow.Scheduling{
			Guaranteed: []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}, {InstanceType: "ml.g5.8xlarge", Count: 4}},
			Sharing:    workflow.SharingBorrow, BorrowLimitPercent: 100, Preemption: workflow.PreemptLowerPriority, FairShareWeight: 30}},
		{ConnectionID: 2, Scheduling: workflow.Scheduling{
			Guaranteed: []workflow.Capacity{{InstanceType: "ml.g5.8xlarge", Count: 2}},
			Sharing:    workflow.SharingNeither, Preemption: workflow.PreemptNever, FairShareWeight: 5}},
	}
}

// quotaOf is the ClusterQueue's quota of resource r in flavor f: its
// nominalQuota, borrowingLimit and lendingLimit ("<nil>" when unset).
func quotaOf(t *testing.T, cq *unstructured.Unstructured, f string, r corev1.ResourceName) (nominal, borrowing, lending string) {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, fl := range groups[0].(map[string]any)["flavors"].([]any) {
		fm := fl.(map[string]any)
		if fm["name"] != f {
			continue
		}
		for _, rs := range fm["resources"].([]any) {
			u := &unstructured.Unstructured{Object: rs.(map[string]any)}
			if u.Object["name"] == string(r) {
				return nested(t, u, "nominalQuota"), nested(t, u, "borrowingLimit"), nested(t, u, "lendingLimit")
			}
		}
	}
	t.Fatalf("the ClusterQueue has no %s in flavor %s", r, f)
	return "", "", ""
}

func sameQuantity(t *testing.T, got string, want int64, r corev1.ResourceName) bool {
	t.Helper()
	q, err := resource.ParseQuantity(got)
	return err == nil && q.Cmp(quantity(r, want)) == 0
}

// TestTeamQueueSumsTheTeamsShares: the team's ClusterQueue sums the three
// connections' guarantees per flavor and resource (figures from the
// accelerator table, share by share: the oracle), their borrowing limits
// and what the lending one lends; LowerPriority only if every contract
// allows it, the largest weight; it selects the team's namespaces by
// label, carries the team's labels and names the three connections; the
// flavor only another connection has is added; the plan's hash does not
// change.
func TestTeamQueueSumsTheTeamsShares(t *testing.T) {
	s := managedSettings()
	self, others := teamShares()
	p, err := BuildPlan(3, 1, self.Hash(), self, s)
	if err != nil {
		t.Fatal(err)
	}
	shares := append(slices.Clone(others), p.Share)
	team, err := p.WithTeamQueue(shares, s)
	if err != nil {
		t.Fatal(err)
	}
	if team.Hash() != p.Hash() {
		t.Errorf("the team's queue changed the plan's hash: the approval pins this connection's plan")
	}
	cq := find(t, team, "ClusterQueue", "hyperpod-ns-red-clusterqueue")

	// The oracle: each share's instances times the table's resources.
	type key struct {
		flavor string
		r      corev1.ResourceName
	}
	nominal, borrow, lend := map[key]int64{}, map[key]int64{}, map[key]int64{}
	for _, sh := range shares {
		pct := int64(0)
		if sh.Scheduling.Sharing.Borrows() {
			pct = int64(sh.Scheduling.BorrowLimitPercent)
		}
		for _, g := range sh.Scheduling.Guaranteed {
			per := s.Accelerators[g.InstanceType]
			for r, n := range map[corev1.ResourceName]int64{
				corev1.ResourceCPU: int64(per.CPU), corev1.ResourceMemory: int64(per.MemoryGiB), "nvidia.com/gpu": int64(per.Accelerators),
			} {
				k := key{g.InstanceType, r}
				nominal[k] += int64(g.Count) * n
				borrow[k] += int64(g.Count) * n * pct / 100
				if sh.Scheduling.Sharing.Lends() {
					lend[k] += int64(g.Count) * n
				}
			}
		}
	}
	if len(nominal) != 6 {
		t.Fatalf("oracle has %d flavor resources, want 2 flavors × 3 resources", len(nominal))
	}
	for k, want := range nominal {
		n, b, l := quotaOf(t, cq, k.flavor, k.r)
		if !sameQuantity(t, n, want, k.r) || !sameQuantity(t, b, borrow[k], k.r) || !sameQuantity(t, l, lend[k], k.r) {
			t.Errorf("%s %s: nominal %s, borrowing %s, lending %s; want %d, %d, %d (the three connections summed)",
				k.flavor, k.r, n, b, l, want, borrow[k], lend[k])
		}
	}
	if got := nested(t, cq, "spec", "preemption", "withinClusterQueue"); got != "Never" {
		t.Errorf("withinClusterQueue %s, want Never: connection 2's contract never lets its team preempt its work", got)
	}
	if got := nested(t, cq, "spec", "preemption", "reclaimWithinCohort"); got != "Any" {
		t.Errorf("reclaimWithinCohort %s, want Any: connection 3 lends", got)
	}
	if got := nested(t, cq, "spec", "fairSharing", "weight"); got != "50" {
		t.Errorf("fair-share weight %s, want the largest, 50", got)
	}
	if got := nested(t, cq, "spec", "namespaceSelector", "matchLabels", LabelTeam); got != "red" {
		t.Errorf("namespaceSelector selects team %s, want red", got)
	}
	exprs, _, _ := unstructured.NestedSlice(cq.Object, "spec", "namespaceSelector", "matchExpressions")
	if len(exprs) != 1 || exprs[0].(map[string]any)["key"] != LabelRevoked || exprs[0].(map[string]any)["operator"] != "DoesNotExist" {
		t.Errorf("namespaceSelector expressions %v, want only: not %s", exprs, LabelRevoked)
	}
	if l := cq.GetLabels(); len(l) != 2 || l[LabelTeam] != "red" || l[LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v, want the team's alone", l)
	}
	if got := cq.GetAnnotations()[AnnotationTeamConnections]; got != "1,2,3" {
		t.Errorf("%s = %q, want 1,2,3", AnnotationTeamConnections, got)
	}
	i := slices.IndexFunc(team.Objects, isTeamQueue)
	if !slices.Equal(team.Objects[i].TeamMembers, []int64{1, 2, 3}) {
		t.Errorf("TeamMembers %v, want 1 2 3", team.Objects[i].TeamMembers)
	}
	// The g5 flavor (connections 1 and 2 only) comes before the queue.
	f := slices.IndexFunc(team.Objects, func(o Object) bool { return o.Kind == "ResourceFlavor" && o.Name == "ml.g5.8xlarge" })
	if f < 0 || f > i || !team.Objects[f].Shared {
		t.Errorf("ResourceFlavor ml.g5.8xlarge at %d (queue at %d): want it shared, before the queue", f, i)
	}
	if len(team.Objects) != len(p.Objects)+1 {
		t.Errorf("%d objects, want the plan's %d and the flavor", len(team.Objects), len(p.Objects))
	}
	// p itself is not changed, and a share given twice counts once.
	if got := find(t, p, "ClusterQueue", "hyperpod-ns-red-clusterqueue").GetAnnotations()[AnnotationTeamConnections]; got != "3" {
		t.Errorf("the plan's own queue names %q after WithTeamQueue, want 3", got)
	}
	again, err := p.WithTeamQueue(append(shares, p.Share), s)
	if err != nil || again.YAML() != team.YAML() {
		t.Errorf("a share given twice changed the queue (%v)", err)
	}
}

// TestRevocationOfATeamQueue: revoking one connection applies the team's
// queue without it while another counts, and deletes it when none does
// (or when the queue was never summed with others: one connection).
func TestRevocationOfATeamQueue(t *testing.T) {
	s := managedSettings()
	self, others := teamShares()
	p, err := BuildPlan(3, 1, self.Hash(), self, s)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := p.WithTeamQueue(others, s)
	if err != nil {
		t.Fatal(err)
	}
	none, err := p.WithTeamQueue(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plan  Plan
		want  StepAction
		names string
	}{
		{"two others remain", rest, ActionApply, "1,2"},
		{"the last one", none, ActionDelete, "3"},
		{"never summed", p, ActionDelete, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Step
			for _, st := range RevocationPlan(tc.plan, RevokeLock) {
				if st.Object.Kind == "ClusterQueue" {
					got = append(got, st)
				}
			}
			if len(got) != 1 || got[0].Action != tc.want {
				t.Fatalf("ClusterQueue steps %+v, want one %s", got, tc.want)
			}
			if tc.want == ActionApply {
				if a := got[0].Object.Obj.GetAnnotations()[AnnotationTeamConnections]; a != tc.names {
					t.Errorf("the applied queue sums %q, want %q", a, tc.names)
				}
			}
		})
	}
}

// TestTeamQueuesFrom: a job's plan is summed with the team's other
// connections as the lookup reads them (asked for the plan's team and
// cluster, without the plan's connection), with its own share or without
// it; a plan without a team queue (HyperPod-managed) is not looked up.
func TestTeamQueuesFrom(t *testing.T) {
	s := managedSettings()
	self, others := teamShares()
	var asked []string
	tq := TeamQueuesFrom(func(_ context.Context, team, cluster string, except int64) ([]QueueShare, error) {
		asked = append(asked, team+"/"+cluster+"/"+strconv.FormatInt(except, 10))
		return others, nil
	}, s)
	p, err := BuildPlan(3, 1, self.Hash(), self, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		withSelf bool
		want     string
	}{{true, "1,2,3"}, {false, "1,2"}} {
		got, err := tq(t.Context(), p, tc.withSelf)
		if err != nil {
			t.Fatal(err)
		}
		if a := find(t, got, "ClusterQueue", "hyperpod-ns-red-clusterqueue").GetAnnotations()[AnnotationTeamConnections]; a != tc.want {
			t.Errorf("withSelf %v: the queue sums %q, want %q", tc.withSelf, a, tc.want)
		}
	}
	if want := []string{"red/shared-hp/3", "red/shared-hp/3"}; !slices.Equal(asked, want) {
		t.Errorf("looked up %v, want %v", asked, want)
	}
	hp, err := BuildPlan(3, 1, self.Hash(), self, DefaultClusterSettings())
	if err != nil {
		t.Fatal(err)
	}
	asked = nil
	if got, err := tq(t.Context(), hp, true); err != nil || len(asked) != 0 || got.YAML() != hp.YAML() {
		t.Errorf("HyperPod-managed plan: looked up %v, err %v; want it as it is, no lookup", asked, err)
	}
}
