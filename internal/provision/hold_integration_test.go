package provision_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestHoldIntegration is a hold's journey on the real kube-apiserver with
// the real Kueue CRDs: a proposed hold that an admin confirms sets
// spec.stopPolicy Hold on the team's LocalQueue and its (portal-managed)
// ClusterQueue through a recorded hold job; a re-apply of the plan and the
// drift check leave the hold alone; an explicit drain sets HoldAndDrain;
// release sets None.
func TestHoldIntegration(t *testing.T) {
	b := newWBed(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b.setInventory(ctx, 1)
	tn := b.approve(ctx, "wint"+wintRandom(t), b.plans)
	w := b.worker("w1")
	served, _ := clusterReader(t)
	w.Preflight = served.RequireServed // hold jobs pass the test bed's served-version check
	b.runOnce(ctx, w)
	if st := b.state(ctx, tn.conn.ID); st != workflow.StateActive {
		t.Fatalf("state after provisioning = %s", st)
	}
	b.settleQuota(ctx, tn)

	var queues []provision.Object
	for _, o := range tn.plan.Objects {
		if o.Kind == "LocalQueue" || o.Kind == "ClusterQueue" {
			queues = append(queues, o)
		}
	}
	if len(queues) != 2 {
		t.Fatalf("plan queues = %d, want the ClusterQueue and the LocalQueue", len(queues))
	}
	stopPolicies := func() string {
		t.Helper()
		var out []string
		for _, o := range queues {
			live, err := b.live(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			p, _, _ := unstructured.NestedString(live.Object, "spec", "stopPolicy")
			out = append(out, o.Kind+"="+p)
		}
		return strings.Join(out, " ")
	}
	// Kueue's CRD defaults stopPolicy to None.
	if got := stopPolicies(); got != "ClusterQueue=None LocalQueue=None" {
		t.Fatalf("before any hold: %s", got)
	}
	runHold := func(step workflow.HoldStep, confirmed bool, want string) {
		t.Helper()
		b.clock.Add(time.Minute)
		_, jobID, err := b.db.DecideHold(ctx, tn.conn.ID, step, b.admin, confirmed, "test "+string(step), b.clock.Now())
		if err != nil || jobID == 0 {
			t.Fatalf("%s: job %d, %v", step, jobID, err)
		}
		b.runOnce(ctx, w)
		if j := b.job(ctx, jobID); j.State != workflow.JobSucceeded || j.Kind != workflow.JobHold {
			t.Fatalf("%s job = %s %s: %s", step, j.Kind, j.State, j.LastError)
		}
		ss := b.steps(ctx, jobID)
		if len(ss) != 2 {
			t.Fatalf("%s steps = %+v", step, ss)
		}
		for _, s := range ss {
			if s.State != workflow.StepDone || !strings.Contains(s.Name, "stopPolicy") || !strings.Contains(s.Detail, "spec.stopPolicy") {
				t.Errorf("%s step = %+v", step, s)
			}
		}
		if got := stopPolicies(); got != want {
			t.Errorf("after %s: %s, want %s", step, got, want)
		}
	}

	// Nothing is stopped by a proposal.
	if _, err := b.db.ProposeHold(ctx, tn.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "no longer used", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := stopPolicies(); got != "ClusterQueue=None LocalQueue=None" {
		t.Fatalf("after a proposal: %s", got)
	}
	runHold(workflow.HoldStepConfirm, false, "ClusterQueue=Hold LocalQueue=Hold")

	// A re-apply of the plan (its own field manager, no stopPolicy) keeps
	// the hold, and the drift check does not report it.
	job, err := b.db.EnqueueReapply(ctx, tn.conn.ID, b.admin, "re-apply while held", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.runOnce(ctx, w)
	if j := b.job(ctx, job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("re-apply job = %s: %s", j.State, j.LastError)
	}
	if got := stopPolicies(); got != "ClusterQueue=Hold LocalQueue=Hold" {
		t.Errorf("after a re-apply while held: %s", got)
	}
	checker := &provision.DriftChecker{
		List: func(ctx context.Context) ([]provision.ConnVersion, error) {
			return []provision.ConnVersion{{ConnectionID: tn.conn.ID, Version: tn.conn.ApprovedVersion}}, nil
		},
		Plans:        b.plans,
		CheckAll:     provision.DriftAllOf(b.look, nil),
		StopPolicies: b.db.HoldStopPolicies,
		Save:         b.db.SaveDrift,
		Clock:        b.clock.Now,
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		r, _ := b.db.Drift(ctx, tn.conn.ID)
		t.Errorf("drift while held: %d drifted (%+v), %v", n, r.Items, err)
	}

	// Someone sets the LocalQueue's hold back by hand: the drift check
	// reports that queue's stopPolicy (the plan alone never sets it), and
	// the hold job tried again applies the hold over the edit.
	lq := queues[1]
	live, err := b.live(ctx, lq)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(live.Object, workflow.StopNone, "spec", "stopPolicy"); err != nil {
		t.Fatal(err)
	}
	ri, err := b.resource(lq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Update(ctx, live, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 1 {
		t.Errorf("drift after the hold was set back by hand: %d drifted, %v", n, err)
	}
	r, err := b.db.Drift(ctx, tn.conn.ID)
	if err != nil || len(r.Items) != 1 || r.Items[0].Kind != "LocalQueue" || !slices.Equal(r.Items[0].Fields, []string{"spec.stopPolicy"}) ||
		!strings.Contains(r.Items[0].Detail, "kubectl-edit") {
		t.Errorf("drift items = %+v, %v; want the LocalQueue's stopPolicy, set by kubectl-edit", r.Items, err)
	}
	retry, err := b.db.EnqueueHold(ctx, tn.conn.ID, b.admin, "set back by hand", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// While the hold job is queued its queues are not compared.
	if sp, err := b.db.HoldStopPolicies(ctx); err != nil || sp[tn.conn.ID] != "" {
		t.Errorf("stop policies with a hold job queued = %v, %v; want the connection left out", sp, err)
	}
	b.runOnce(ctx, w)
	if j := b.job(ctx, retry.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("hold job tried again = %s: %s", j.State, j.LastError)
	}
	if got := stopPolicies(); got != "ClusterQueue=Hold LocalQueue=Hold" {
		t.Errorf("after the hold job was tried again: %s", got)
	}
	if n, err := checker.RunOnce(ctx); err != nil || n != 0 {
		t.Errorf("drift after the hold was applied again: %d, %v", n, err)
	}

	// A drain needs the explicit confirmation.
	if _, _, err := b.db.DecideHold(ctx, tn.conn.ID, workflow.HoldStepDrain, b.admin, false, "drain", b.clock.Now()); err == nil {
		t.Fatal("a drain without the explicit confirmation was accepted")
	}
	runHold(workflow.HoldStepDrain, true, "ClusterQueue=HoldAndDrain LocalQueue=HoldAndDrain")
	runHold(workflow.HoldStepRelease, false, "ClusterQueue=None LocalQueue=None")

	c, err := b.db.Connection(ctx, tn.conn.ID)
	if err != nil || c.Hold != workflow.HoldNone || c.State != workflow.StateActive {
		t.Errorf("after release: hold %q, state %s, %v", c.Hold, c.State, err)
	}
	acts := strings.Join(auditActions(b.auditOf(ctx, tn.conn.ID)), " ")
	for _, want := range []string{"hold.propose", "hold.confirm", "hold.start", "hold.applied", "hold.drain", "hold.release"} {
		if !strings.Contains(acts, want) {
			t.Errorf("audit lacks %s: %s", want, acts)
		}
	}

	// On a cluster whose Kueue does not serve the queues' version, a hold
	// job fails at once, as a provisioning job does, and writes nothing.
	w.Preflight = servedBy("v1", "rbac.authorization.k8s.io/v1", "networking.k8s.io/v1", "admissionregistration.k8s.io/v1", "kueue.x-k8s.io/v1beta1").RequireServed
	b.clock.Add(time.Minute)
	if _, err := b.db.ProposeHold(ctx, tn.conn.ID, workflow.Actor{Email: "reviewer@example.test"}, "again", b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, jobID, err := b.db.DecideHold(ctx, tn.conn.ID, workflow.HoldStepConfirm, b.admin, false, "old Kueue", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.runOnce(ctx, w)
	j := b.job(ctx, jobID)
	if j.State != workflow.JobFailed || j.Attempts != 1 || !strings.Contains(j.LastError, "does not serve kueue.x-k8s.io/v1beta2 (it serves only v1beta1)") ||
		!strings.Contains(j.LastError, provision.KueueAddonVersion) {
		t.Errorf("hold job on an older Kueue = %s after %d attempts: %s", j.State, j.Attempts, j.LastError)
	}
	if ss := b.steps(ctx, jobID); len(ss) != 0 {
		t.Errorf("%d steps recorded; nothing may be applied", len(ss))
	}
	if got := stopPolicies(); got != "ClusterQueue=None LocalQueue=None" {
		t.Errorf("after a hold job on an older Kueue: %s", got)
	}
	b.verifyAudit(ctx)
}
