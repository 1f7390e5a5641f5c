package provision_test

// Amendments (issue 11): an active connection's approved change is applied
// in place by an amend job. These tests run the worker with its AWS half on
// the awstest endpoints and a scripted cluster (fakeCluster) for the
// Kubernetes steps, on the real store; amend_integration_test.go runs the
// Kubernetes half on the test bed's API server.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// amendment files a change of an active connection as the portal does: its
// author saves the edited contract (a new version, amendment draft) and
// submits it, an admin independent of it approves it with the plan it sees
// pinned, which queues the amend job. It returns that job and the plan.
func amendment(tb testing.TB, db *store.DB, now time.Time, plans func(context.Context, int64, int) (provision.Plan, error),
	connID int64, edit func(*workflow.Contract)) (workflow.Job, provision.Plan) {
	tb.Helper()
	ctx := tb.Context()
	conn, err := db.Connection(ctx, connID)
	if err != nil {
		tb.Fatal(err)
	}
	if conn.State != workflow.StateActive {
		tb.Fatalf("connection %d is %s; amendments are of active connections", connID, conn.State)
	}
	cur, err := db.Version(ctx, connID, conn.CurrentVersion)
	if err != nil {
		tb.Fatal(err)
	}
	author := workflow.Actor{ID: cur.AuthorID, Email: cur.AuthorEmail}
	c := cur.Contract
	edit(&c)
	if conn, _, err = db.SaveContract(ctx, connID, conn.CurrentVersion, c, author, now); err != nil {
		tb.Fatalf("save the change: %v", err)
	}
	if conn.Amendment != workflow.AmendDraft || conn.State != workflow.StateActive {
		tb.Fatalf("after saving a change: %s, amendment %q; want active with a draft", conn.State, conn.Amendment)
	}
	if _, err := db.Transition(ctx, connID, workflow.EventSubmit, author, "", store.Expect{}, now); err != nil {
		tb.Fatalf("submit the change: %v", err)
	}
	ver, err := db.Version(ctx, connID, conn.CurrentVersion)
	if err != nil {
		tb.Fatal(err)
	}
	plan, err := plans(ctx, connID, ver.Version)
	if err != nil {
		tb.Fatalf("plan of the change: %v", err)
	}
	u, err := db.RecordLogin(ctx, "https://idp.example.test", "amend-admin", "amend-admin@example.test", "Amend Admin", []string{"portal-admins"}, now)
	if err != nil {
		tb.Fatal(err)
	}
	conn, _, err = db.Approve(ctx, connID, workflow.Actor{ID: u.ID, Email: u.Email},
		store.Expect{Version: ver.Version, Hash: ver.Hash, PlanHash: plan.Hash()}, "change fits", workflow.ClusterFacts{}, now)
	if err != nil {
		tb.Fatalf("approve the change: %v", err)
	}
	if conn.Amendment != workflow.AmendApproved || conn.ApprovedVersion != cur.Version {
		tb.Fatalf("after approving the change: amendment %q, approved version %d; want approved, still %d", conn.Amendment, conn.ApprovedVersion, cur.Version)
	}
	jobs, err := db.JobsFor(ctx, connID)
	if err != nil {
		tb.Fatal(err)
	}
	for _, j := range jobs {
		if j.Kind == workflow.JobAmend && j.State == workflow.JobQueued {
			if j.Version != ver.Version || j.FromVersion != cur.Version || j.PlanHash != plan.Hash() {
				tb.Fatalf("amend job %+v; want version %d from %d pinned to %s", j, ver.Version, cur.Version, plan.Hash())
			}
			return j, plan
		}
	}
	tb.Fatalf("no queued amend job after the approval: %+v", jobs)
	return workflow.Job{}, provision.Plan{}
}

// amendedTo checks the store's word after an amend job: the connection is
// active on version want with no change open (or, failed, still on the
// version before with the amendment failed).
func amendedTo(tb testing.TB, db *store.DB, connID int64, want int, amendment workflow.Amendment) {
	tb.Helper()
	c, err := db.Connection(tb.Context(), connID)
	if err != nil {
		tb.Fatal(err)
	}
	if c.State != workflow.StateActive || c.ApprovedVersion != want || c.Amendment != amendment {
		tb.Errorf("connection: %s on approved version %d, amendment %q; want active on %d, amendment %q", c.State, c.ApprovedVersion, c.Amendment, want, amendment)
	}
}

// moreAndNewRole is the change the AWS tests amend with: 3 guaranteed
// instances instead of 2, another project role and another workload role.
const (
	newProjectRole  = "arn:aws:iam::111122223333:role/red-project-v2"
	newWorkloadRole = "arn:aws:iam::111122223333:role/red-workload-v2"
)

func moreAndNewRole(c *workflow.Contract) {
	c.Scheduling.Guaranteed[0].Count = 3
	c.ProjectRoleARN = newProjectRole
	c.WorkloadRoleARN = newWorkloadRole
}

// provisionedAWSBed is an awsBed whose connection is active.
func provisionedAWSBed(t *testing.T) (*awsBed, *fakeCluster) {
	t.Helper()
	b := newAWSBed(t, 1)
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active; job %+v", s, b.jobNow(b.job.ID))
	}
	return b, cluster
}

// assertAmendedAWS checks the AWS side of moreAndNewRole, applied once: the
// quota updated in place to 3 (version 2, one UpdateComputeQuota, whose
// TargetVersion was the version it read), the new project role's entry
// with the Studio group and policies, the old one's gone, nothing else
// created again.
func (b *awsBed) assertAmendedAWS(createsBefore map[string]int) {
	t := b.t
	t.Helper()
	c := workflow.ExampleContract()
	st := b.stack
	q := st.SageMaker.QuotaByName(awsprov.QuotaName("red"))
	if q.Version != 2 || *q.Config.ComputeQuotaResources[0].Count != 3 {
		t.Errorf("quota after the amendment: version %d, %+v; want version 2 with 3 instances", q.Version, q.Config.ComputeQuotaResources)
	}
	if got := st.SageMaker.UpdateTargets(); !slices.Equal(got, []int32{1}) {
		t.Errorf("UpdateComputeQuota TargetVersions seen: %v; want one update, from version 1", got)
	}
	if n := st.SageMaker.Count("updated:compute-quota"); n != 1 {
		t.Errorf("%d quota updates, want 1", n)
	}
	e := st.EKS.AccessEntry(c.EKSClusterName, newProjectRole)
	if !slices.Equal(e.KubernetesGroups, []string{"studio-red"}) || len(st.EKS.Policies(c.EKSClusterName, newProjectRole)) != 5 {
		t.Errorf("the new project role's entry: %+v with %d policies; want group studio-red and 5 policies", e, len(st.EKS.Policies(c.EKSClusterName, newProjectRole)))
	}
	if n := st.EKS.AccessEntries(c.EKSClusterName); n != 2 {
		t.Errorf("%d access entries; want 2 (the new project role's and the access role's): the old project role's must go", n)
	}
	if e := st.EKS.AccessEntry(c.EKSClusterName, c.ProjectRoleARN); e.PrincipalARN != "" {
		t.Errorf("the old project role still has an entry: %+v", e)
	}
	// The team's Studio domain runs as the new project role, updated in
	// place (one UpdateDomain, no second domain).
	recs, err := b.db.AWSResources(t.Context(), b.conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	domains := 0
	for _, r := range recs {
		if r.Kind == string(awsprov.KindDomain) {
			domains++
			if d := st.SageMaker.Domain(r.ResourceID); d.ExecutionRole() != newProjectRole {
				t.Errorf("domain %s runs as %q, want %s", r.ResourceID, d.ExecutionRole(), newProjectRole)
			}
		}
	}
	if domains != 1 {
		t.Errorf("%d studio domains recorded, want 1", domains)
	}
	if n := st.SageMaker.Count("UpdateDomain"); n != 1 {
		t.Errorf("%d UpdateDomain calls, want 1", n)
	}
	// The Pod Identity association keeps its id and gets the new role, in
	// place (UpdatePodIdentityAssociation), once.
	pods := st.EKS.PodIdentities(c.EKSClusterName)
	if len(pods) != 1 || pods[0].RoleARN != newWorkloadRole || pods[0].ServiceAccount != "red-workloads" {
		t.Errorf("pod identities after the amendment: %+v; want red-workloads with %s", pods, newWorkloadRole)
	}
	if n := st.EKS.Count("updated:pod-identity"); n != 1 {
		t.Errorf("%d pod identity updates, want 1", n)
	}
	after := st.Creates()
	want := map[string]int{}
	for k, v := range createsBefore {
		want[k] = v
	}
	want["access-entry"]++
	want["access-policy"] += 5
	if !equalCounts(after, want) {
		t.Errorf("created %v after the amendment; want %v (only the new role's entry and its 5 policies)", after, want)
	}
	if n := st.SageMaker.Count("deleted:compute-quota") + st.EKS.Count("deleted:pod-identity"); n != 0 {
		t.Errorf("an amendment deleted %d quotas or pod identities", n)
	}
	if n := st.EKS.Count("deleted:access-entry"); n != 1 {
		t.Errorf("%d access entries deleted; want 1 (the old project role's)", n)
	}
}

// The change applies in place: the compute quota is updated with its
// TargetVersion, the changed project role gets its access entry and the
// old role's is removed; the connection moves to the new version. A
// re-apply afterwards writes nothing on AWS.
func TestWorkerAmendsAWS(t *testing.T) {
	b, cluster := provisionedAWSBed(t)
	before := b.stack.Creates()
	job, plan := amendment(t, b.db, b.clock.Now(), b.worker("x", cluster).Plans, b.conn.ID, moreAndNewRole)
	b.runOnce(b.worker("w2", cluster))
	if j := b.jobNow(job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("amend job %+v, want succeeded", j)
	}
	amendedTo(t, b.db, b.conn.ID, 2, workflow.AmendNone)
	b.assertAmendedAWS(before)

	// The steps: the new plan as provisioning applies it, then the old
	// role's entry removed.
	steps := b.steps(job.ID)
	if want := len(provision.ApplySteps(plan)) + 1; len(steps) != want {
		t.Fatalf("%d steps, want %d", len(steps), want)
	}
	if s := steps[0]; s.Name != "SageMaker compute quota red-quota" || s.Outcome != "updated" {
		t.Errorf("first step %+v, want the quota updated", s)
	}
	if s := steps[len(steps)-1]; s.Name != "remove EKS access entry "+workflow.ExampleContract().ProjectRoleARN || s.Outcome != "deleted" {
		t.Errorf("last step %+v, want the old project role's entry removed", s)
	}
	recs, _ := b.db.AWSResources(t.Context(), b.conn.ID)
	var quota *workflow.AWSRecord
	for i := range recs {
		if recs[i].Kind == string(awsprov.KindComputeQuota) {
			quota = &recs[i]
		}
	}
	if quota == nil || quota.Action != "updated" || quota.Version != 2 {
		t.Errorf("recorded quota %+v, want updated to version 2", quota)
	}

	// A re-apply of the new version writes nothing on AWS.
	creates, sm, eks := b.stack.Creates(), b.stack.SageMaker.Counts(), b.stack.EKS.Counts()
	if _, err := b.db.EnqueueReapply(t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "check", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.runOnce(b.worker("w3", cluster))
	if after := b.stack.Creates(); !equalCounts(creates, after) {
		t.Errorf("re-apply created more: %v -> %v", creates, after)
	}
	for _, op := range []string{"UpdateComputeQuota", "UpdateDomain", "updated:compute-quota", "deleted:compute-quota"} {
		if n := b.stack.SageMaker.Count(op) - sm[op]; n != 0 {
			t.Errorf("re-apply after the amendment: %s %d times", op, n)
		}
	}
	for _, op := range []string{"UpdateAccessEntry", "UpdatePodIdentityAssociation", "AssociateAccessPolicy", "DisassociateAccessPolicy", "DeleteAccessEntry"} {
		if n := b.stack.EKS.Count(op) - eks[op]; n != 0 {
			t.Errorf("re-apply after the amendment: %s %d times", op, n)
		}
	}
}

// The amend job's steps are the new plan's ApplySteps, then what only the
// old plan has, removed in revocation's order; nothing shared, nothing
// HyperPod owns, never the namespace.
func TestAmendSteps(t *testing.T) {
	s := provision.DefaultClusterSettings()
	s.AWS = awsprov.DevSettings()
	c1 := workflow.ExampleContract()
	c1.EgressAllowances = append(c1.EgressAllowances, workflow.Egress{Destination: "10.20.0.0/16", Ports: []int{5432}, Reason: "database"})
	c2 := c1
	c2.EgressAllowances = c1.EgressAllowances[:1]
	c2.ProjectRoleARN = newProjectRole
	p1, err := provision.BuildPlan(1, 1, c1.Hash(), c1, s)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := provision.BuildPlan(1, 2, c2.Hash(), c2, s)
	if err != nil {
		t.Fatal(err)
	}
	steps := provision.AmendSteps(p1, p2)
	apply := provision.ApplySteps(p2)
	if len(steps) < len(apply) {
		t.Fatalf("%d steps, fewer than the new plan's %d", len(steps), len(apply))
	}
	for i := range apply {
		if steps[i].Name() != apply[i].Name() {
			t.Errorf("step %d = %s, want the new plan's %s", i, steps[i].Name(), apply[i].Name())
		}
	}
	var removals []string
	for _, st := range steps[len(apply):] {
		removals = append(removals, st.Name())
	}
	want := []string{
		"remove EKS access entry " + c1.ProjectRoleARN,
		"delete NetworkPolicy hyperpod-ns-red/allow-egress-10-20-0-0-16",
	}
	if !slices.Equal(removals, want) {
		t.Errorf("removals:\n%s\nwant:\n%s", strings.Join(removals, "\n"), strings.Join(want, "\n"))
	}
	// The same plan amends to itself with nothing to remove; a plan with
	// nothing at all would remove everything of the team's but the
	// namespace, shared objects and what HyperPod owns.
	if r := provision.AmendRemovals(p1, p1); len(r) != 0 {
		t.Errorf("removals of an unchanged plan: %v", r)
	}
	// Both ownership modes: with the portal managing the ClusterQueue the
	// namespace is the portal's own, and still never removed.
	portal := s
	portal.ClusterQueueManagedByPortal = true
	p3, err := provision.BuildPlan(1, 1, c1.Hash(), c1, portal)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []provision.Plan{p1, p3} {
		all := provision.AmendRemovals(p, provision.Plan{})
		if len(all) == 0 {
			t.Fatal("nothing removed when everything goes")
		}
		for _, st := range all {
			if st.Object.Shared || st.Object.Kind == "Namespace" || (st.AWS == nil && st.Object.Owner != provision.OwnerPortal) {
				t.Errorf("removal %s: shared, a namespace or HyperPod's", st.Name())
			}
			if st.Action != provision.ActionDelete && st.Action != provision.ActionAWSRemove {
				t.Errorf("removal %s is a %s", st.Name(), st.Action)
			}
		}
	}
}

// A worker dies after any step of an amend job; the next one resumes it,
// and the job ends with the new version active and nothing on AWS done
// twice (the quota is updated once: the resumed attempt reads version 2 and
// finds it as desired).
func TestWorkerAmendResumesAfterACrashBetweenAnySteps(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	probe, pc := provisionedAWSBed(t)
	_, plan := amendment(t, probe.db, probe.clock.Now(), probe.worker("x", pc).Plans, probe.conn.ID, moreAndNewRole)
	n := len(provision.ApplySteps(plan)) + 1
	for crash := range n {
		b, cluster := provisionedAWSBed(t)
		before := b.stack.Creates()
		job, _ := amendment(t, b.db, b.clock.Now(), b.worker("x", cluster).Plans, b.conn.ID, moreAndNewRole)
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
		amendedTo(t, b.db, b.conn.ID, 1, workflow.AmendApproved)
		b.clock.Add(2 * time.Minute) // the lease expires
		b.runOnce(b.worker("next", cluster))
		if j := b.jobNow(job.ID); j.State != workflow.JobSucceeded || j.Attempts != 2 {
			t.Fatalf("crash after step %d: job %+v, want succeeded at attempt 2", crash, j)
		}
		amendedTo(t, b.db, b.conn.ID, 2, workflow.AmendNone)
		b.assertAmendedAWS(before)
		if t.Failed() {
			t.Fatalf("crash after step %d of %d", crash, n)
		}
	}
}

// A permanent AWS error fails the amendment: the connection stays active on
// the approved version with the amendment failed, and nothing of the old
// version is removed (the removals come after every apply). Denied at the
// first step (the quota update), nothing at all has changed.
func TestWorkerAmendFailsOnAPermanentError(t *testing.T) {
	for _, tc := range []struct{ svc, op string }{{"sagemaker", "UpdateComputeQuota"}, {"eks", "CreateAccessEntry"}} {
		t.Run(tc.op, func(t *testing.T) {
			b, cluster := provisionedAWSBed(t)
			c := workflow.ExampleContract()
			job, _ := amendment(t, b.db, b.clock.Now(), b.worker("x", cluster).Plans, b.conn.ID, moreAndNewRole)
			core := b.stack.Cores()[tc.svc]
			calls, applies := core.Count(tc.op), len(cluster.calls)
			core.Deny(tc.op, -1)
			b.runOnce(b.worker("w2", cluster))
			j := b.jobNow(job.ID)
			if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "not authorized to perform: ") || !strings.Contains(j.LastError, tc.op) {
				t.Fatalf("amend job %+v, want failed with the service's message", j)
			}
			amendedTo(t, b.db, b.conn.ID, 1, workflow.AmendFailed)
			if n := core.Count(tc.op) - calls; n != 1 {
				t.Errorf("a permanent error was retried: %d calls", n)
			}
			// The old project role keeps its entry, groups and policies;
			// nothing was deleted.
			e := b.stack.EKS.AccessEntry(c.EKSClusterName, c.ProjectRoleARN)
			if !slices.Equal(e.KubernetesGroups, []string{"studio-red"}) || len(b.stack.EKS.Policies(c.EKSClusterName, c.ProjectRoleARN)) != 5 {
				t.Errorf("the old project role's entry after the failure: %+v", e)
			}
			for _, core := range b.stack.Cores() {
				for op, n := range core.Counts() {
					if strings.HasPrefix(op, "deleted:") && n > 0 {
						t.Errorf("a failed amendment deleted: %s %d", op, n)
					}
				}
			}
			for _, s := range b.steps(job.ID) {
				if (strings.HasPrefix(s.Name, "remove ") || strings.HasPrefix(s.Name, "delete ")) && s.State != workflow.StepPending {
					t.Errorf("removal step %s is %s after the failure, want pending", s.Name, s.State)
				}
			}
			if tc.op == "UpdateComputeQuota" {
				q := b.stack.SageMaker.QuotaByName(awsprov.QuotaName("red"))
				if q.Version != 1 || *q.Config.ComputeQuotaResources[0].Count != 2 {
					t.Errorf("quota after the failed update: version %d, %+v; want version 1 with 2 instances", q.Version, q.Config.ComputeQuotaResources)
				}
				if n := len(cluster.calls) - applies; n != 0 {
					t.Errorf("%d Kubernetes applies after the first step failed", n)
				}
			}
		})
	}
}

// The approval pins the amended version's plan: a worker that builds
// another plan for it (as when the cluster settings changed since) fails the job
// before any step, and the approved version stays as it was.
func TestWorkerAmendRefusesAnotherPlan(t *testing.T) {
	b, cluster := provisionedAWSBed(t)
	job, _ := amendment(t, b.db, b.clock.Now(), b.worker("x", cluster).Plans, b.conn.ID, moreAndNewRole)
	w := b.worker("w2", cluster)
	w.Plans = func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		ver, err := b.db.Version(ctx, id, v)
		if err != nil {
			return provision.Plan{}, err
		}
		c := ver.Contract
		c.Scheduling.Guaranteed[0].Count = 4 // not what was approved
		return provision.BuildPlan(id, v, c.Hash(), c, b.settings)
	}
	applies := len(cluster.calls)
	b.runOnce(w)
	j := b.jobNow(job.ID)
	if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "is not the one approved") {
		t.Fatalf("amend job %+v, want failed: not the approved plan", j)
	}
	amendedTo(t, b.db, b.conn.ID, 1, workflow.AmendFailed)
	if n := len(cluster.calls) - applies; n != 0 || b.stack.SageMaker.Count("UpdateComputeQuota") != 0 {
		t.Errorf("%d applies and %d quota updates for a plan nobody approved", n, b.stack.SageMaker.Count("UpdateComputeQuota"))
	}
}
