package provision_test

// Amendments on the test bed's real API server (issue 11): the amend job
// updates the team's objects in place with server-side apply and deletes
// what the new version dropped. Skips without the test bed, as the other
// worker integration tests do (worker_integration_test.go's wbed).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// dbEgress is the CIDR egress rule the tests add and then drop, and the
// name of its NetworkPolicy.
var dbEgress = workflow.Egress{Destination: "10.20.0.0/16", Ports: []int{5432}, Reason: "the team's database"}

const dbEgressPolicy = provision.NamePolicyEgressPrefix + "10-20-0-0-16"

func withDBEgress(c *workflow.Contract) { c.EgressAllowances = append(c.EgressAllowances, dbEgress) }

// threeNoDB is the amendment under test: 3 guaranteed instances instead of
// 2, and the database egress rule dropped.
func threeNoDB(c *workflow.Contract) {
	c.Scheduling.Guaranteed[0].Count = 3
	var keep []workflow.Egress
	for _, e := range c.EgressAllowances {
		if e.Destination != dbEgress.Destination {
			keep = append(keep, e)
		}
	}
	c.EgressAllowances = keep
}

// provisionedWithDB is a wbed with a tenant whose version 1 has the
// database egress rule, provisioned (active).
func provisionedWithDB(t *testing.T, ctx context.Context) (*wbed, wintTenant) {
	t.Helper()
	b := newWBed(t)
	b.setInventory(ctx, 2)
	b.edit = withDBEgress
	tn := b.approve(ctx, "wint"+wintRandom(t), b.plans)
	b.edit = nil
	b.runOnce(ctx, b.worker("w1"))
	if s := b.state(ctx, tn.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active", s)
	}
	if _, err := b.live(ctx, policyOf(tn.plan, dbEgressPolicy)); err != nil {
		t.Fatalf("the database egress policy after provisioning: %v", err)
	}
	return b, tn
}

// policyOf is the plan's object named name (fatal-free: zero when absent).
func policyOf(p provision.Plan, name string) provision.Object {
	for _, o := range p.Objects {
		if o.Name == name {
			return o
		}
	}
	return provision.Object{}
}

// teamQuota is the plan's team ResourceQuota.
func teamQuota(tb testing.TB, p provision.Plan) provision.Object {
	tb.Helper()
	for _, o := range p.Objects {
		if o.Kind == "ResourceQuota" && o.Owner == provision.OwnerPortal {
			return o
		}
	}
	tb.Fatal("the plan has no ResourceQuota")
	return provision.Object{}
}

// sameHard reports whether two spec.hard maps hold equal quantities.
func sameHard(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		x, err1 := resource.ParseQuantity(fmt.Sprint(v))
		y, err2 := resource.ParseQuantity(fmt.Sprint(w))
		if err1 != nil || err2 != nil || x.Cmp(y) != 0 {
			return false
		}
	}
	return true
}

// assertAmended checks the cluster after the amendment to newPlan: every
// object of the new plan live with the new version's labels and exactly
// once (assertLive), the quota's hard limits the new plan's, and the
// dropped egress rule's NetworkPolicy gone.
func (b *wbed) assertAmended(ctx context.Context, tn wintTenant, newPlan provision.Plan) {
	b.tb.Helper()
	now := tn
	now.plan, now.names = newPlan, nil
	for _, o := range newPlan.Objects {
		now.names = append(now.names, o.Kind+" "+o.Ref())
	}
	b.assertLive(ctx, now)
	q := teamQuota(b.tb, newPlan)
	live, err := b.live(ctx, q)
	if err != nil {
		b.tb.Fatal(err)
	}
	want, _, _ := unstructured.NestedMap(q.Obj.Object, "spec", "hard")
	got, _, _ := unstructured.NestedMap(live.Object, "spec", "hard")
	if !sameHard(got, want) {
		b.tb.Errorf("ResourceQuota %s hard = %v, want the new version's %v", q.Ref(), got, want)
	}
	gone := policyOf(tn.plan, dbEgressPolicy)
	if _, err := b.live(ctx, gone); !apierrors.IsNotFound(err) {
		b.tb.Errorf("NetworkPolicy %s after the amendment dropped its rule: %v; want NotFound", gone.Ref(), err)
	}
}

// settleHard waits until kube-controller-manager has caught the quota's
// status up with its spec (the amendment changed it), so that its status
// update does not land in the middle of a later count.
func (b *wbed) settleHard(ctx context.Context, p provision.Plan) {
	b.tb.Helper()
	q := teamQuota(b.tb, p)
	for {
		live, err := b.live(ctx, q)
		if err == nil {
			spec, _, _ := unstructured.NestedMap(live.Object, "spec", "hard")
			status, _, _ := unstructured.NestedMap(live.Object, "status", "hard")
			if sameHard(spec, status) {
				return
			}
		}
		if ctx.Err() != nil {
			b.tb.Fatalf("the status of %s never caught up with its spec: %v", q.Ref(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// 2 → 3 instances and a dropped egress rule, on the real API server: the
// ResourceQuota is updated in place, the rule's NetworkPolicy deleted, the
// connection moves to version 2; a re-apply afterwards writes nothing.
func TestWorkerAmendsIntegration(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, tn := provisionedWithDB(t, ctx)
	oldQuota, err := b.live(ctx, teamQuota(t, tn.plan))
	if err != nil {
		t.Fatal(err)
	}
	job, plan := amendment(t, b.db, b.clock.Now(), b.plans, tn.conn.ID, threeNoDB)
	newHard, _, _ := unstructured.NestedMap(teamQuota(t, plan).Obj.Object, "spec", "hard")
	oldHard, _, _ := unstructured.NestedMap(oldQuota.Object, "spec", "hard")
	if sameHard(newHard, oldHard) {
		t.Fatalf("the amendment does not change the quota (%v): the test would prove nothing", newHard)
	}

	b.runOnce(ctx, b.worker("w2"))
	if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded || j.AppliedPlanHash != plan.Hash() {
		t.Fatalf("amend job %+v, want succeeded with plan %s", j, plan.Hash())
	}
	amendedTo(t, b.db, tn.conn.ID, 2, workflow.AmendNone)
	b.assertAmended(ctx, tn, plan)
	live, err := b.live(ctx, teamQuota(t, plan))
	if err != nil {
		t.Fatal(err)
	}
	if live.GetUID() != oldQuota.GetUID() {
		t.Errorf("the ResourceQuota was recreated (uid %s, was %s), not updated in place", live.GetUID(), oldQuota.GetUID())
	}
	ss := b.steps(ctx, job.ID)
	if last := ss[len(ss)-1]; last.Name != "delete NetworkPolicy "+tn.plan.Namespace+"/"+dbEgressPolicy || last.Outcome != string(provision.Deleted) {
		t.Errorf("last step %+v, want the dropped rule's policy deleted", last)
	}

	// A re-apply of the new version writes nothing.
	b.settleHard(ctx, plan)
	if _, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "check", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.counter.Reset()
	b.runOnce(ctx, b.worker("w3"))
	b.logCounts("re-applying after the amendment", 0)
	if _, _, _, writes := b.counter.Counts(); writes != 0 {
		t.Errorf("re-apply after the amendment wrote %d times, want 0", writes)
	}
	for _, s := range b.steps(ctx, b.lastJob(ctx, tn.conn.ID).ID) {
		if s.Outcome != string(provision.Unchanged) {
			t.Errorf("re-apply step %s: %s, want unchanged", s.Name, s.Outcome)
		}
	}
}

// lastJob is the connection's newest job.
func (b *wbed) lastJob(ctx context.Context, connID int64) workflow.Job {
	b.tb.Helper()
	jobs, err := b.db.JobsFor(ctx, connID)
	if err != nil || len(jobs) == 0 {
		b.tb.Fatalf("JobsFor = %v, %v", jobs, err)
	}
	last := jobs[0]
	for _, j := range jobs {
		if j.ID > last.ID {
			last = j
		}
	}
	return last
}

// A worker dies after a step of an amend job (the first, the second, a
// middle one, the last apply and the removal of the dropped rule's policy);
// another resumes it once the lease expires, and the cluster ends as the
// new version says, each object once, the dropped policy gone; the store
// says version 2. Every step index is crashed after in
// TestWorkerAmendResumesAfterACrashBetweenAnySteps (AWS endpoints, scripted
// cluster); here the API server is real, and each run provisions a tenant
// from scratch, so a sample keeps `make test` short.
func TestWorkerAmendCrashRecoveryIntegration(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	c1 := wintContract("probe")
	withDBEgress(&c1)
	c2 := c1
	c2.Scheduling.Guaranteed = append([]workflow.Capacity(nil), c1.Scheduling.Guaranteed...)
	threeNoDB(&c2)
	s := newWBed(t).settings
	p1, err := provision.BuildPlan(1, 1, c1.Hash(), c1, s)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := provision.BuildPlan(1, 2, c2.Hash(), c2, s)
	if err != nil {
		t.Fatal(err)
	}
	n := len(provision.AmendSteps(p1, p2))
	for _, crash := range []int{0, 1, n / 2, n - 2, n - 1} {
		t.Run(fmt.Sprintf("after step %d of %d", crash, n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			b, tn := provisionedWithDB(t, ctx)
			job, plan := amendment(t, b.db, b.clock.Now(), b.plans, tn.conn.ID, threeNoDB)
			dying := b.worker("dying")
			dying.AfterStep = func(seq int) error {
				if seq == crash {
					return errWorkerDied
				}
				return nil
			}
			if did, err := dying.RunOnce(ctx); !did || !errors.Is(err, errWorkerDied) {
				t.Fatalf("RunOnce = %v, %v; want the crash", did, err)
			}
			amendedTo(t, b.db, tn.conn.ID, 1, workflow.AmendApproved)
			// Removals come last: until the last step, the dropped rule's
			// policy is still there.
			_, err := b.live(ctx, policyOf(tn.plan, dbEgressPolicy))
			if gone := apierrors.IsNotFound(err); gone != (crash == n-1) || (err != nil && !gone) {
				t.Errorf("the dropped rule's policy after a crash after step %d of %d: %v", crash, n, err)
			}
			next := b.worker("next")
			b.clock.Add(59 * time.Second)
			b.idle(ctx, next, "while the lease holds")
			b.clock.Add(time.Second)
			b.runOnce(ctx, next)
			if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded || j.Attempts != 2 {
				t.Fatalf("amend job %+v, want succeeded at attempt 2", j)
			}
			amendedTo(t, b.db, tn.conn.ID, 2, workflow.AmendNone)
			b.assertAmended(ctx, tn, plan)
			for i, s := range b.steps(ctx, job.ID) {
				if s.State != workflow.StepDone {
					t.Errorf("step %d %s is %s, want done", i, s.Name, s.State)
				}
			}
		})
	}
}
