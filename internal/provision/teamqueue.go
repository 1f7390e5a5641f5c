package provision

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// One ClusterQueue per team (issue 31 item 6). When the portal manages the
// ClusterQueues, a team has one, named by ClusterSettings.ClusterQueueName,
// however many connections it has on the cluster: each connection's plan
// applies the same queue, so the queue cannot be any one connection's. It
// is the team's:
//
//   - its nominal quota, per instance type (flavor) and resource, is the sum
//     of the guarantees of the team's connections that count
//     (workflow.TeamQueueStates: approved to under review, not revoking),
//     each with its approved version's contract; the borrowing limit is the
//     sum of what each may borrow (its percentage of its own guarantee), and
//     the lending limit the sum of what each lends (all of a lending
//     connection's guarantee, none of the others'; unset when every one
//     lends). Preemption within the queue is LowerPriority only when every
//     connection's contract allows it (a connection that asked for Never is
//     never preempted by its team's other work); the fair-share weight is
//     the largest any contract gives the team; reclaimWithinCohort is Any
//     when one of them lends;
//   - its namespaceSelector selects the team's namespaces by the label every
//     portal namespace of the team carries (LabelTeam), not a namespace
//     locked by a revocation (LabelRevoked), so the LocalQueue of every
//     connection of the team points at a queue that admits its namespace;
//   - it carries the team's labels (LabelManagedBy, LabelTeam), never one
//     connection's: no LabelConnection, version or contract hash. The
//     connections it sums are in AnnotationTeamConnections.
//
// This is how HyperPod models a team's quota: a compute quota targets one
// team (CreateComputeQuota's ComputeQuotaTarget is a TeamName and a
// FairShareWeight, its ComputeQuotaConfig one PreemptTeamTasks and one
// ResourceSharingConfig; https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateComputeQuota.html),
// and task governance turns it into one ClusterQueue per team, which the
// HyperPod CLI finds from the team namespace's quota allocation label:
// HYPERPOD_NAMESPACE_PREFIX + quota_allocation_id +
// SAGEMAKER_MANAGED_CLUSTER_QUEUE_SUFFIX, "hyperpod-ns-<team>-clusterqueue"
// (aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/cli/commands/cluster.py,
// list_cluster; constants/command_constants.py). In HyperPod-managed mode a
// team has one connection per cluster anyway: its only namespace is
// hyperpod-ns-<team>, which one connection holds (workflow's
// ValidationEnv.NamespaceTaken), and its compute quota is tagged with that
// connection (awsprov.EnsureComputeQuota refuses another's).
//
// When. BuildPlan builds the queue from the connection's own share alone
// (what it brings; Object.TeamMembers says so). A job recomputes it from
// the store when it runs (Worker.TeamQueue, TeamQueuesFrom): provisioning,
// amending and re-applying connection C apply the queue summing the team's
// other counted connections (their approved versions, read then) and C's
// version of the job; revoking C applies the others' sum, or deletes the
// queue when C was the last (RevocationPlan). Each job reads the store when
// it runs, so the last job to finish writes the team's total as the store
// has it then, not its own share; and after applying the queue a job reads
// the team's connections again and re-applies while they changed
// (Worker.settleTeamQueue), so a job whose read came before another job's
// change cannot leave its older sum behind by applying last. The drift check compares the queue with
// the same sum (the connection's approved version with the others').
//
// The plan's hash (Plan.HashedText) names the team queue but leaves its
// body out: what other connections bring changes without this
// connection's approval changing, and an approval pins this connection's
// plan.

// AnnotationTeamConnections lists, comma-separated in ascending order, the
// connections whose guarantees a team object (the team's ClusterQueue)
// sums.
const AnnotationTeamConnections = "portal.hyperpod.io/connections"

// QueueShare is what one connection brings to its team's ClusterQueue: the
// scheduling of its contract version that counts.
type QueueShare struct {
	ConnectionID int64
	Scheduling   workflow.Scheduling
}

// TeamShares looks up the queue shares of team's connections on cluster
// that its ClusterQueue counts (workflow.TeamQueueStates), each from its
// approved version, but connection except's (*store.DB's TeamQueueVersions,
// adapted).
type TeamShares func(ctx context.Context, team, cluster string, except int64) ([]QueueShare, error)

// TeamQueuesFrom is a Worker.TeamQueue (and, withSelf true, the drift
// check's): p with its team ClusterQueue rebuilt from the team's other
// counted connections, as others reads them now, and, withSelf, p's own
// share. A plan without a team queue (HyperPod-managed mode) is returned
// as it is, without a lookup.
func TeamQueuesFrom(others TeamShares, s ClusterSettings) func(ctx context.Context, p Plan, withSelf bool) (Plan, error) {
	return func(ctx context.Context, p Plan, withSelf bool) (Plan, error) {
		if !p.HasTeamQueue() {
			return p, nil
		}
		shares, err := others(ctx, p.Team, p.Cluster, p.ConnectionID)
		if err != nil {
			return Plan{}, fmt.Errorf("provision: the other connections of team %s: %w", p.Team, err)
		}
		if withSelf {
			shares = append(shares, p.Share)
		}
		return p.WithTeamQueue(shares, s)
	}
}

// PlansWithTeamQueue is plans with each plan's team ClusterQueue summing
// the team's connections, the plan's own included (teamQueue withSelf): the
// plans a drift check compares the cluster with. A nil teamQueue leaves
// plans as they are.
func PlansWithTeamQueue(plans func(ctx context.Context, connID int64, version int) (Plan, error),
	teamQueue func(ctx context.Context, p Plan, withSelf bool) (Plan, error)) func(context.Context, int64, int) (Plan, error) {
	if teamQueue == nil {
		return plans
	}
	return func(ctx context.Context, connID int64, version int) (Plan, error) {
		p, err := plans(ctx, connID, version)
		if err != nil {
			return p, err
		}
		return teamQueue(ctx, p, true)
	}
}

// HasTeamQueue reports whether p applies its team's ClusterQueue (the
// portal manages the ClusterQueues).
func (p Plan) HasTeamQueue() bool {
	return slices.ContainsFunc(p.Objects, isTeamQueue)
}

// isTeamQueue reports whether o is the team's ClusterQueue: a team object
// that is not shared (the flavors WithTeamQueue adds are both).
func isTeamQueue(o Object) bool { return o.Team && !o.Shared }

// WithTeamQueue returns p with its team ClusterQueue summing shares (in
// any order; a connection listed twice counts once, its last share), and a
// ResourceFlavor for every instance type the sum has that p lacks (shared
// and, like the queue, left out of p's hash: Object.Team). No
// shares: the queue's object stays, with no members, for a revocation to
// delete (RevocationPlan). p itself is not changed. A plan without a team
// queue is returned as it is.
func (p Plan) WithTeamQueue(shares []QueueShare, s ClusterSettings) (Plan, error) {
	i := slices.IndexFunc(p.Objects, isTeamQueue)
	if i < 0 {
		return p, nil
	}
	s = s.withDefaults()
	byID := map[int64]QueueShare{}
	for _, sh := range shares {
		byID[sh.ConnectionID] = sh
	}
	ids := slices.Sorted(maps.Keys(byID))
	b := &builder{c: workflow.Contract{Team: p.Team}, s: s, plan: Plan{Team: p.Team, ConnectionID: p.ConnectionID}}
	objs := slices.Clone(p.Objects)
	if len(ids) == 0 {
		o := objs[i]
		o.TeamMembers = nil
		o.Detail = "no connection of the team counts any more: the team's queue goes"
		objs[i] = o
		p.Objects = objs
		return p, nil
	}
	sorted := make([]QueueShare, len(ids))
	for k, id := range ids {
		sorted[k] = byID[id]
	}
	sum, err := sumShares(sorted, s.Accelerators)
	if err != nil {
		return Plan{}, err
	}
	b.teamQueue(objs[i].Name, sum)
	if b.err != nil {
		return Plan{}, b.err
	}
	objs[i] = b.plan.Objects[0]
	// Flavors of the sum's instance types that p does not apply (another
	// connection's): shared objects, the same in every plan.
	have := map[string]bool{}
	for _, o := range objs {
		if o.Kind == "ResourceFlavor" {
			have[o.Name] = true
		}
	}
	fb := &builder{s: s}
	var missing guaranteed
	for _, row := range sum.rows {
		if !have[row.instanceType] {
			missing.rows = append(missing.rows, row)
		}
	}
	fb.resourceFlavors(missing)
	if fb.err != nil {
		return Plan{}, fb.err
	}
	for k := range fb.plan.Objects {
		// Not this connection's: left out of its hash with the queue.
		fb.plan.Objects[k].Team = true
	}
	p.Objects = slices.Concat(objs[:i], fb.plan.Objects, objs[i:])
	return p, nil
}

// queueSum is the team's queue: the shares' guarantees summed per instance
// type and resource, and their sharing and preemption combined.
type queueSum struct {
	members   []int64
	rows      []guaranteeRow // one per instance type, sorted, counts summed
	resources []corev1.ResourceName
	borrow    map[flavorResource]int64 // what the members may borrow
	lend      map[flavorResource]int64 // what the lending members lend
	allLend   bool
	anyLend   bool
	anyBorrow bool
	within    kueue.PreemptionPolicy
	weight    int
	pct       int64 // the borrow percentage, when there is one share
}

type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// sumShares sums shares (sorted by connection id, at least one) as the
// package comment says.
func sumShares(shares []QueueShare, table map[string]ResourcesPerInstance) (queueSum, error) {
	q := queueSum{borrow: map[flavorResource]int64{}, lend: map[flavorResource]int64{}, allLend: true, within: kueue.PreemptionPolicyLowerPriority}
	counts := map[string]int64{}
	per := map[string]ResourcesPerInstance{}
	var accel []corev1.ResourceName
	type part struct {
		g   guaranteed
		pct int64
		sch workflow.Scheduling
	}
	parts := make([]part, len(shares))
	for k, sh := range shares {
		g, err := guarantee(sh.Scheduling.Guaranteed, table)
		if err != nil {
			return queueSum{}, fmt.Errorf("connection %d: %w", sh.ConnectionID, err)
		}
		parts[k] = part{g: g, sch: sh.Scheduling}
		if sh.Scheduling.Sharing.Borrows() {
			parts[k].pct = int64(sh.Scheduling.BorrowLimitPercent)
		}
		q.members = append(q.members, sh.ConnectionID)
		for _, row := range g.rows {
			counts[row.instanceType] += row.count
			per[row.instanceType] = row.per
		}
		for _, r := range g.resources[2:] {
			if !slices.Contains(accel, r) {
				accel = append(accel, r)
			}
		}
		lends := sh.Scheduling.Sharing.Lends()
		q.allLend = q.allLend && lends
		q.anyLend = q.anyLend || lends
		q.anyBorrow = q.anyBorrow || sh.Scheduling.Sharing.Borrows()
		if sh.Scheduling.Preemption != workflow.PreemptLowerPriority {
			q.within = kueue.PreemptionPolicyNever
		}
		q.weight = max(q.weight, sh.Scheduling.FairShareWeight)
	}
	if len(parts) == 1 {
		q.pct = parts[0].pct
	}
	slices.Sort(accel)
	q.resources = append([]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, accel...)
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		q.rows = append(q.rows, guaranteeRow{instanceType: t, count: counts[t], per: per[t]})
	}
	for _, pt := range parts {
		for _, row := range pt.g.rows {
			for _, r := range q.resources {
				n := row.amount(r)
				k := flavorResource{row.instanceType, r}
				q.borrow[k] += n * pt.pct / 100
				if pt.sch.Sharing.Lends() {
					q.lend[k] += n
				}
			}
		}
	}
	return q, nil
}

// teamQueue adds the team's ClusterQueue summing q (see the package
// comment above). Without a cohort, neither borrowing nor lending limits
// are set (Kueue needs a cohort for either).
func (b *builder) teamQueue(name string, q queueSum) {
	cohort := b.s.Cohort
	rg := kueue.ResourceGroup{CoveredResources: q.resources}
	var flavorParts []string
	for _, row := range q.rows {
		fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(row.instanceType)}
		var rs []string
		for _, r := range q.resources {
			k := flavorResource{row.instanceType, r}
			rq := kueue.ResourceQuota{Name: r, NominalQuota: quantity(r, row.amount(r))}
			if cohort != "" {
				bl := quantity(r, q.borrow[k])
				rq.BorrowingLimit = &bl
				if !q.allLend {
					ll := quantity(r, q.lend[k])
					rq.LendingLimit = &ll
				}
			}
			fq.Resources = append(fq.Resources, rq)
			rs = append(rs, fmt.Sprintf("%s=%s", r, rq.NominalQuota.String()))
		}
		rg.Flavors = append(rg.Flavors, fq)
		flavorParts = append(flavorParts, fmt.Sprintf("%s × %d (%s)", row.instanceType, row.count, strings.Join(rs, " ")))
	}
	reclaim := kueue.PreemptionPolicyNever
	if cohort != "" && q.anyLend {
		reclaim = kueue.PreemptionPolicyAny
	}
	weight := resource.MustParse(strconv.Itoa(q.weight))
	spec := kueue.ClusterQueueSpec{
		ResourceGroups:    []kueue.ResourceGroup{rg},
		CohortName:        kueue.CohortReference(cohort),
		NamespaceSelector: TeamNamespaceSelector(b.plan.Team),
		Preemption: &kueue.ClusterQueuePreemption{
			WithinClusterQueue:  q.within,
			ReclaimWithinCohort: reclaim,
		},
		FairSharing: &kueue.FairSharing{Weight: &weight},
	}
	sharing := "no cohort: no lending or borrowing"
	if cohort != "" {
		lend := "lends none"
		switch {
		case q.allLend:
			lend = "lends all idle"
		case q.anyLend:
			lend = "lends the idle guarantee of its lending connections"
		}
		borrow := fmt.Sprintf("borrows up to %d%%", q.pct)
		if len(q.members) > 1 && q.anyBorrow {
			borrow = "borrows up to each connection's limit, summed"
		} else if len(q.members) > 1 {
			borrow = "borrows none"
		}
		sharing = fmt.Sprintf("cohort %s, %s, %s", cohort, borrow, lend)
	}
	ids := make([]string, len(q.members))
	for k, id := range q.members {
		ids[k] = strconv.FormatInt(id, 10)
	}
	cq := &kueue.ClusterQueue{
		TypeMeta: kueueTypeMeta("ClusterQueue"),
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelTeam: b.plan.Team},
			Annotations: map[string]string{AnnotationTeamConnections: strings.Join(ids, ",")}},
		Spec: spec,
	}
	u, err := toUnstructured(cq)
	if err != nil {
		b.err = errors.Join(b.err, err)
		return
	}
	b.plan.Objects = append(b.plan.Objects, Object{
		Kind: "ClusterQueue", Name: name, Obj: u, Team: true, TeamMembers: slices.Clone(q.members),
		Detail: fmt.Sprintf("team %s's queue, summing connection %s: %s; %s; preemption within queue %s, reclaim %s; fair-share weight %d",
			b.plan.Team, strings.Join(ids, ", "), strings.Join(flavorParts, ", "), sharing, q.within, reclaim, q.weight),
	})
}

// TeamNamespaceSelector selects team's namespaces: those labelled
// LabelTeam=team (every namespace a plan of the team applies carries it),
// but not one a revocation locked (LabelRevoked).
func TeamNamespaceSelector(team string) *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels:      map[string]string{LabelTeam: team},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: LabelRevoked, Operator: metav1.LabelSelectorOpDoesNotExist}},
	}
}

// teamObjectsText is how HashedText names p's team objects: their kind
// and name, never their body (see the package comment above).
func (p Plan) teamObjectsText(b *strings.Builder) {
	for _, o := range p.Objects {
		if isTeamQueue(o) {
			fmt.Fprintf(b, "# team: %s %s\n", o.Kind, o.Ref())
		}
	}
}
