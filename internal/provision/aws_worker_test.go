package provision_test

// The worker with its AWS half: the real awsprov.Runner and aws-sdk-go-v2
// clients against the local endpoints of awstest (strict, stateful,
// counting every create), the real store, and a scripted cluster for the
// Kubernetes steps (the Kubernetes side has its own tests on a real API
// server).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/datazone"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssoadmin"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var teamGroups = []string{"team-red-members", "team-red-owners"}

// awsBed is a bed whose plans have AWS calls, and the endpoints they go to.
type awsBed struct {
	*bed
	stack  *awstest.Stack
	runner *awsprov.Runner
}

func newAWSBed(t *testing.T, maxAttempts int, opts ...bedOption) *awsBed {
	t.Helper()
	stack := awstest.NewStack(t, workflow.ExampleContract().EKSClusterName, teamGroups...)
	s := provision.DefaultClusterSettings()
	s.AWS = awsprov.DevSettings()
	s.AWS.IdentityStoreID = stack.IdentityStore.StoreID()
	s.AWS.TeamGroups = map[string][]string{"red": teamGroups}
	b := newBedWith(t, s, opts...)
	cfg := awstest.Config(maxAttempts)
	base := func(c *awstest.Core) *string { return aws.String(c.URL()) }
	sm := sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.BaseEndpoint = base(stack.SageMaker.Core) })
	runner := &awsprov.Runner{
		Clients: awsprov.Clients{
			SageMaker: sm, Domains: sm,
			SSOAdmin:      ssoadmin.NewFromConfig(cfg, func(o *ssoadmin.Options) { o.BaseEndpoint = base(stack.SSOAdmin.Core) }),
			IdentityStore: identitystore.NewFromConfig(cfg, func(o *identitystore.Options) { o.BaseEndpoint = base(stack.IdentityStore.Core) }),
			EKS:           eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = base(stack.EKS.Core) }),
			DataZone:      datazone.NewFromConfig(cfg, func(o *datazone.Options) { o.BaseEndpoint = base(stack.DataZone.Core) }),
		},
		Poll: awsprov.PollConfig{Interval: time.Second, Timeout: time.Minute, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }},
	}
	return &awsBed{bed: b, stack: stack, runner: runner}
}

func (b *awsBed) worker(owner string, cluster *fakeCluster) *provision.Worker {
	w := b.bed.worker(owner, cluster)
	w.AWS = b.runner
	return w
}

// runUntilSettled runs jobs until none is due, moving the clock past each
// backoff; it returns how many attempts it took.
func (b *awsBed) runUntilSettled(w *provision.Worker) int {
	b.t.Helper()
	for n := 1; n <= 30; n++ {
		did, err := w.RunOnce(b.t.Context())
		if err != nil {
			b.t.Fatalf("RunOnce: %v", err)
		}
		if !did {
			return n - 1
		}
		b.clock.Add(time.Hour)
	}
	b.t.Fatal("jobs never settled")
	return 0
}

// assertProvisioned checks every AWS resource of the example contract on
// the endpoints, and that each was created exactly once.
func (b *awsBed) assertProvisioned() {
	t := b.t
	t.Helper()
	c := workflow.ExampleContract()
	st := b.stack
	if got := st.Creates(); got["compute-quota"] != 1 || got["domain"] != 1 || got["assignment"] != 2 ||
		got["access-entry"] != 2 || got["access-policy"] != 7 || got["pod-identity"] != 1 {
		t.Errorf("created %v; want 1 quota, 1 domain, 2 assignments, 2 access entries with 5+2 policies, 1 pod identity", got)
	}
	if st.SageMaker.Quotas() != 1 {
		t.Errorf("%d compute quotas", st.SageMaker.Quotas())
	}
	for _, role := range []struct {
		arn, group string
		policies   int
	}{{c.ProjectRoleARN, "studio-red", 5}, {c.AccessRoleARN, "team-red-submitters", 2}} {
		e := st.EKS.AccessEntry(c.EKSClusterName, role.arn)
		if !slices.Equal(e.KubernetesGroups, []string{role.group}) {
			t.Errorf("access entry %s: groups %v, want [%s]", role.arn, e.KubernetesGroups, role.group)
		}
		ps := st.EKS.Policies(c.EKSClusterName, role.arn)
		if len(ps) != role.policies {
			t.Errorf("access entry %s: %d policies, want %d", role.arn, len(ps), role.policies)
		}
		for _, p := range ps {
			// AWS's Studio setup: the user-cluster policy on the cluster,
			// space templates in jupyter-k8s-shared, the rest in the team
			// namespace (awsprov.DefaultStudioPolicies).
			scope, ns := "namespace", []string{"hyperpod-ns-red"}
			switch {
			case strings.HasSuffix(p.PolicyARN, "/"+awsprov.PolicyHyperPodUserCluster):
				scope, ns = "cluster", nil
			case strings.HasSuffix(p.PolicyARN, "/"+awsprov.PolicyHyperPodSpaceTemplate):
				ns = []string{awsprov.SpaceTemplateNamespace}
			}
			if string(p.Scope) != scope || !slices.Equal(p.Namespaces, ns) {
				t.Errorf("access entry %s: policy %s scoped %s %v, want %s %v", role.arn, p.PolicyARN, p.Scope, p.Namespaces, scope, ns)
			}
		}
	}
	pods := st.EKS.PodIdentities(c.EKSClusterName)
	if len(pods) != 1 || pods[0].Namespace != "hyperpod-ns-red" || pods[0].ServiceAccount != "red-workloads" || pods[0].RoleARN != c.WorkloadRoleARN {
		t.Errorf("pod identities = %+v", pods)
	}
	want := []string{"GROUP:" + st.GroupIDs[teamGroups[0]], "GROUP:" + st.GroupIDs[teamGroups[1]]}
	slices.Sort(want)
	if got := st.Assignments(); !slices.Equal(got, want) {
		t.Errorf("assignments = %v, want the two team groups %v", got, want)
	}
}

func TestWorkerProvisionsAWS(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active; job %+v", s, b.jobNow(b.job.ID))
	}
	b.assertProvisioned()
	steps := b.steps(b.job.ID)
	if len(steps) != len(b.plan.Objects)+len(b.plan.AWS) {
		t.Fatalf("%d steps for %d objects and %d AWS calls", len(steps), len(b.plan.Objects), len(b.plan.AWS))
	}
	if steps[0].Name != "SageMaker compute quota red-quota" || steps[0].Outcome != "created" || !strings.Contains(steps[0].Detail, "arn:aws:sagemaker:") {
		t.Errorf("first step = %+v, want the compute quota created with its ARN", steps[0])
	}
	recs, err := b.db.AWSResources(t.Context(), b.conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(b.plan.AWS) {
		t.Fatalf("recorded %d AWS resources, want %d: %+v", len(recs), len(b.plan.AWS), recs)
	}
	for _, r := range recs {
		if r.Action != "created" || (r.ResourceID == "" && r.ARN == "") {
			t.Errorf("recorded %+v, want created with an id or ARN", r)
		}
		// The worker records at its own clock's time, by the job it ran.
		if !r.UpdatedAt.Equal(b.clock.Now()) || r.JobID != b.job.ID || r.ConnectionID != b.conn.ID {
			t.Errorf("recorded %+v, want job %d of connection %d at the worker's time %s", r, b.job.ID, b.conn.ID, b.clock.Now())
		}
	}

	// Re-applying the same plan writes nothing on AWS.
	before := b.stack.Creates()
	if _, err := b.db.EnqueueReapply(t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "check", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.runOnce(b.worker("w2", cluster))
	if after := b.stack.Creates(); !equalCounts(before, after) {
		t.Errorf("re-apply created more: %v -> %v", before, after)
	}
	for _, op := range []string{"UpdateComputeQuota", "UpdateDomain"} {
		if n := b.stack.SageMaker.Count(op); n != 0 {
			t.Errorf("re-apply called %s %d times", op, n)
		}
	}
	for _, op := range []string{"UpdateAccessEntry", "UpdatePodIdentityAssociation", "DisassociateAccessPolicy"} {
		if n := b.stack.EKS.Count(op); n != 0 {
			t.Errorf("re-apply called %s %d times", op, n)
		}
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A changed contract (what a newly approved version brings) updates the
// compute quota in place with its TargetVersion; nothing is created again.
func TestWorkerUpdatesComputeQuota(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	recs, _ := b.db.AWSResources(t.Context(), b.conn.ID)
	quotaID := recs[0].ResourceID

	w := b.worker("w2", cluster)
	w.Plans = func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		ver, err := b.db.Version(ctx, id, v)
		if err != nil {
			return provision.Plan{}, err
		}
		c := ver.Contract
		c.Scheduling.Guaranteed[0].Count = 3
		c.Scheduling.Sharing = workflow.SharingNeither
		return provision.BuildPlan(id, v, c.Hash(), c, b.settings)
	}
	if _, err := b.db.EnqueueReapply(t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "new version", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.runOnce(w)
	q := b.stack.SageMaker.Quota(quotaID)
	if q.Version != 2 || *q.Config.ComputeQuotaResources[0].Count != 3 || *q.Config.ResourceSharingConfig.Strategy != "DontLend" {
		t.Errorf("quota after the change: version %d, %+v", q.Version, q.Config)
	}
	if n := b.stack.SageMaker.Count("updated:compute-quota"); n != 1 {
		t.Errorf("%d quota updates, want 1", n)
	}
	if got := b.stack.Creates()["compute-quota"]; got != 1 {
		t.Errorf("%d quotas created, want 1", got)
	}
	recs, _ = b.db.AWSResources(t.Context(), b.conn.ID)
	if recs[0].Action != "updated" || recs[0].Version != 2 {
		t.Errorf("recorded quota %+v, want updated to version 2", recs[0])
	}
}

func TestWorkerRevokesAWS(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	j := b.revoke()
	b.runOnce(b.worker("w2", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateRevoked {
		t.Fatalf("connection %s after revocation, want revoked; job %+v", s, b.jobNow(j.ID))
	}
	c := workflow.ExampleContract()
	st := b.stack
	if st.SageMaker.Quotas() != 0 || st.EKS.AccessEntries(c.EKSClusterName) != 0 || len(st.EKS.PodIdentities(c.EKSClusterName)) != 0 || len(st.Assignments()) != 0 {
		t.Errorf("left after revocation: %d quotas, %d access entries, %d pod identities, %d assignments",
			st.SageMaker.Quotas(), st.EKS.AccessEntries(c.EKSClusterName), len(st.EKS.PodIdentities(c.EKSClusterName)), len(st.Assignments()))
	}
	if n := st.SageMaker.Count("deleted:domain"); n != 0 {
		t.Errorf("the domain was deleted %d times; on_revoke keep keeps it", n)
	}
	steps := b.steps(j.ID)
	var names []string
	for _, s := range steps {
		names = append(names, s.Name+" → "+s.Outcome)
	}
	if !strings.HasPrefix(names[0], "remove EKS pod identity") || !strings.HasSuffix(names[len(names)-1], "keep SageMaker studio domain red-studio → kept") {
		t.Errorf("revocation steps:\n%s", strings.Join(names, "\n"))
	}
	recs, _ := b.db.AWSResources(t.Context(), b.conn.ID)
	for _, r := range recs {
		if (r.Kind == "studio-domain") != (r.Action == "kept") || (r.Kind != "studio-domain" && r.Action != "deleted") {
			t.Errorf("recorded after revocation: %+v", r)
		}
		if r.ResourceID == "" && r.ARN == "" {
			t.Errorf("revocation lost the ids recorded at provisioning: %+v", r)
		}
	}
}

// A worker dies after any step; the next one resumes and nothing on AWS is
// created twice.
func TestWorkerAWSResumesAfterACrashBetweenAnySteps(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	probe := newAWSBed(t, 1)
	n := len(provision.ApplySteps(probe.plan))
	for crash := range n {
		b := newAWSBed(t, 1)
		cluster := &fakeCluster{}
		dying := b.worker("dying", cluster)
		dying.AfterStep = func(seq int) error {
			if seq == crash {
				return errCrash
			}
			return nil
		}
		if did, err := dying.RunOnce(t.Context()); !did || !errors.Is(err, errCrash) {
			t.Fatalf("crash after step %d: RunOnce = %v, %v", crash, did, err)
		}
		b.clock.Add(2 * time.Minute) // the lease expires
		b.runOnce(b.worker("next", cluster))
		if s := b.state(b.conn.ID); s != workflow.StateActive {
			t.Fatalf("crash after step %d: connection %s, want active", crash, s)
		}
		b.assertProvisioned()
		if t.Failed() {
			t.Fatalf("crash after step %d", crash)
		}
	}
}

// Every endpoint throttles in bursts, and the SDK makes one attempt per
// call: the job retries with backoff until it gets through, and creates
// each resource once.
func TestWorkerAWSThrottlingStorm(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	w := b.worker("w1", cluster)
	w.MaxAttempts = 30
	storms := 0
	w.AfterStep = func(seq int) error {
		if seq%3 == 0 && storms < 8 {
			storms++
			for _, c := range b.stack.Cores() {
				c.Throttle(2)
			}
		}
		return nil
	}
	attempts := b.runUntilSettled(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s after the storm, want active; job %+v", s, b.jobNow(b.job.ID))
	}
	if attempts < 2 {
		t.Errorf("%d attempts: the storm never hit", attempts)
	}
	b.assertProvisioned()
	t.Logf("%d storms, %d attempts", storms, attempts)
}

// AccessDenied stops the job with the service's message; the steps before
// it are recorded done, the failed one with the message.
func TestWorkerAWSPermanentErrorStopsTheJob(t *testing.T) {
	b := newAWSBed(t, 1)
	b.stack.EKS.Deny("CreatePodIdentityAssociation", -1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "not authorized to perform: eks:CreatePodIdentityAssociation") {
		t.Fatalf("job = %+v, want failed with the service's message", j)
	}
	steps := b.steps(b.job.ID)
	last := steps[len(steps)-1]
	if last.State != workflow.StepFailed || !strings.HasPrefix(last.Name, "EKS pod identity") {
		t.Errorf("last step %+v, want the pod identity step failed", last)
	}
	for _, s := range steps[:len(steps)-1] {
		if s.State != workflow.StepDone {
			t.Errorf("step %s is %s, want done", s.Name, s.State)
		}
	}
	if b.stack.EKS.Count("CreatePodIdentityAssociation") != 1 {
		t.Errorf("a permanent error was retried: %d calls", b.stack.EKS.Count("CreatePodIdentityAssociation"))
	}
}

// The Unified Studio mode makes a DataZone connection instead of a domain.
func TestWorkerAWSUnifiedStudio(t *testing.T) {
	// The approval pins the plan: file the contract in Unified Studio
	// mode so that the plan approved is the plan the worker builds.
	b := newAWSBed(t, 1, withContract(func(c *workflow.Contract) {
		c.StudioMode, c.UnifiedDomainID, c.UnifiedProjectID = workflow.StudioUnified, awstest.UnifiedDomainID, awstest.UnifiedProjectID
	}))
	w := b.worker("w1", &fakeCluster{})
	w.Plans = func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		ver, err := b.db.Version(ctx, id, v)
		if err != nil {
			return provision.Plan{}, err
		}
		c := ver.Contract
		c.StudioMode, c.UnifiedDomainID, c.UnifiedProjectID = workflow.StudioUnified, awstest.UnifiedDomainID, awstest.UnifiedProjectID
		return provision.BuildPlan(id, v, c.Hash(), c, b.settings)
	}
	b.runOnce(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active; job %+v", s, b.jobNow(b.job.ID))
	}
	got := b.stack.Creates()
	if got["datazone-connection"] != 1 || got["domain"] != 0 || got["assignment"] != 0 {
		t.Errorf("created %v; want one DataZone connection and no domain", got)
	}
	conns := b.stack.DataZone.Connections()
	if len(conns) != 1 || conns[0].Name != "hyperpod-shared-hp" {
		t.Errorf("connections = %+v", conns)
	}
}

// A contract naming a role that already has an access entry made outside
// the portal (a platform admin's role, say) stops the job: the entry keeps
// its groups and policies.
func TestWorkerAWSDoesNotTakeOverAnAccessEntry(t *testing.T) {
	b := newAWSBed(t, 1)
	c := workflow.ExampleContract()
	admin := awsprov.AccessEntry{ClusterName: c.EKSClusterName, PrincipalARN: c.AccessRoleARN, KubernetesGroups: []string{"platform-admins"},
		Policies: []awsprov.AccessPolicy{{PolicyARN: awsprov.AccessPolicyARN(c.Region, awsprov.PolicyEKSClusterAdmin)}}}
	if _, err := awsprov.EnsureAccessEntry(t.Context(), b.runner.Clients.EKS, admin); err != nil {
		t.Fatal(err)
	}
	b.runOnce(b.worker("w1", &fakeCluster{}))
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "does not take over access it did not grant") {
		t.Fatalf("job = %+v, want failed with the ownership message", j)
	}
	e := b.stack.EKS.AccessEntry(c.EKSClusterName, c.AccessRoleARN)
	ps := b.stack.EKS.Policies(c.EKSClusterName, c.AccessRoleARN)
	if !slices.Equal(e.KubernetesGroups, []string{"platform-admins"}) || len(ps) != 1 || !strings.HasSuffix(ps[0].PolicyARN, "AmazonEKSClusterAdminPolicy") {
		t.Errorf("the admin's entry was changed: %+v, %+v", e, ps)
	}
}

// The drift check covers the AWS half: a clean state has no item; a
// compute quota changed behind the portal's back is an item, saved with a
// drift.detected audit event; a re-apply job puts it back, and the next
// check resolves it.
func TestAWSDriftIsReportedAndFixedByReapply(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	w := b.worker("w1", cluster)
	b.runOnce(w)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active", s)
	}
	ctx := t.Context()
	check := provision.DriftOf(nil, b.runner)
	save := func(items []workflow.DriftItem) {
		if err := b.db.SaveDrift(ctx, b.conn.ID, workflow.DriftBasis{Version: 1}, items, "", b.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if items, err := check(ctx, b.plan); err != nil || len(items) != 0 {
		t.Fatalf("drift of a clean state = %v, %v; want none", items, err)
	}
	q := b.stack.SageMaker.QuotaByName(awsprov.QuotaName("red"))
	b.stack.SageMaker.ChangeQuota(q.ID, func(w *int32, _ *string) { *w = 1 })
	items, err := check(ctx, b.plan)
	if err != nil || len(items) != 1 || items[0].Kind != "SageMaker compute quota" || items[0].What != "changed" ||
		!slices.Contains(items[0].Fields, "ComputeQuotaTarget.FairShareWeight") {
		t.Fatalf("drift after a console edit = %v, %v; want the quota's weight", items, err)
	}
	save(items)
	if acts := actions(b.audit(b.conn.ID)); !slices.Contains(acts, "drift.detected") {
		t.Errorf("audit %v lacks drift.detected", acts)
	}

	if _, err := b.db.EnqueueReapply(ctx, b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "fix drift", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.runUntilSettled(w)
	items, err = check(ctx, b.plan)
	if err != nil || len(items) != 0 {
		t.Fatalf("drift after the re-apply = %v, %v; want none", items, err)
	}
	save(items)
	if acts := actions(b.audit(b.conn.ID)); !slices.Contains(acts, "drift.resolved") {
		t.Errorf("audit %v lacks drift.resolved", acts)
	}
}

// snapshotCluster is a fakeCluster that is also a SnapshotApplier, as
// ApplierSteps is: taken is called when a re-apply job takes its snapshot.
type snapshotCluster struct {
	*fakeCluster
	taken func()
}

func (s snapshotCluster) ForPlans(context.Context, []provision.Plan) (provision.StepApplier, error) {
	s.taken()
	return s.fakeCluster, nil
}

// A re-apply job reads the cluster at the first step of each stretch of
// its Kubernetes steps, never before an AWS step that comes ahead of them
// (an AWS step can take minutes, and a snapshot older than the steps it
// serves could call an object edited meanwhile unchanged): at its first
// Kubernetes step, after its guardrail AWS steps, and again at its
// RoleBinding prune, after its access AWS steps.
func TestWorkerReapplySnapshotsAtItsFirstKubernetesStep(t *testing.T) {
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	job, err := b.db.EnqueueReapply(t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "check", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var at [][]workflow.JobStep
	w := b.bed.worker("w2", snapshotCluster{fakeCluster: cluster, taken: func() { at = append(at, b.steps(job.ID)) }})
	w.AWS = b.runner
	b.runOnce(w)
	if j := b.jobNow(job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("re-apply job %s: %s", j.State, j.LastError)
	}
	steps := provision.ReapplySteps(b.plan)
	firstKube := slices.IndexFunc(steps, func(s provision.Step) bool { return s.AWS == nil })
	prune := len(steps) - 1
	if firstKube < 1 || steps[prune].Action != provision.ActionPrune || steps[prune-1].AWS == nil {
		t.Fatalf("the plan's re-apply steps are not AWS, Kubernetes, AWS, prune: first Kubernetes step %d of %d", firstKube, len(steps))
	}
	if len(at) != 2 {
		t.Fatalf("%d snapshots, want two (the objects', the prune's)", len(at))
	}
	for i, running := range []int{firstKube, prune} {
		for seq, s := range at[i] {
			want := workflow.StepPending
			switch {
			case seq < running:
				want = workflow.StepDone
			case seq == running:
				want = workflow.StepRunning
			}
			if s.State != want {
				t.Errorf("when snapshot %d was taken, step %d (%s) was %s; want %s", i+1, seq, s.Name, s.State, want)
			}
		}
	}
}
