package provision_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// Re-apply jobs in batches (reapplybatch.go) on the real API server: the
// worker claims every due re-apply job with the first and runs them from
// one snapshot, each job recorded as if it ran alone.
//
// AWS is not part of this test bed. Where a test needs AWS steps (they
// come before a plan's objects, and the batch's snapshot must be taken
// after them), each plan gets one stand-in guardrail call, run by
// awsStandIn: it does nothing on AWS, and is where the test acts while
// the batch's AWS steps run (an edit by someone else, a failure, a
// shutdown).

// withAWSStep is plans with one stand-in guardrail AWS call added to each
// plan (re-apply jobs are not pinned to a plan hash).
func withAWSStep(plans func(context.Context, int64, int) (provision.Plan, error)) func(context.Context, int64, int) (provision.Plan, error) {
	return func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		p, err := plans(ctx, id, v)
		if err != nil {
			return p, err
		}
		p.AWS = append(p.AWS, awsprov.Call{Kind: awsprov.KindComputeQuota, Phase: awsprov.Guardrail, Service: "stand-in",
			Name: fmt.Sprintf("quota-of-%d", id)})
		return p, nil
	}
}

// awsStandIn is an AWSRunner whose Ensure calls ensure (under a lock) and
// whose Remove is never expected.
type awsStandIn struct {
	mu     sync.Mutex
	ensure func(ctx context.Context, c awsprov.Call) (awsprov.Result, error)
}

func (a *awsStandIn) Ensure(ctx context.Context, c awsprov.Call) (awsprov.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ensure(ctx, c)
}

func (a *awsStandIn) Remove(context.Context, awsprov.Call) (awsprov.Result, error) {
	return awsprov.Result{}, errors.New("the stand-in removes nothing")
}

// kube is a typed client of the test bed's API server (uncounted): the
// hand of "someone else".
func (b *wbed) kube() kubernetes.Interface {
	b.tb.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("PORTAL_TEST_KUBECONFIG"))
	if err != nil {
		b.tb.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// doubleGPUQuota doubles tn's GPU quota by hand, leaving the contract hash
// annotation alone.
func (b *wbed) doubleGPUQuota(ctx context.Context, tn wintTenant) {
	b.tb.Helper()
	quotas := b.kube().CoreV1().ResourceQuotas(tn.plan.Namespace)
	q, err := quotas.Get(ctx, provision.NameResourceQuota, metav1.GetOptions{})
	if err != nil {
		b.tb.Fatal(err)
	}
	gpu := q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")]
	gpu.Add(gpu)
	q.Spec.Hard[corev1.ResourceName("requests.nvidia.com/gpu")] = gpu
	if _, err := quotas.Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		b.tb.Fatal(err)
	}
}

// (a) A re-apply job of each of several unchanged tenants, all run by one
// RunOnce: one snapshot for all of them (the namespace checks included),
// so the lists of one plan's kinds once, no write, and every job succeeded
// with its own steps recorded unchanged and its own audit event, as a job
// run alone records them.
func TestReapplyBatchIntegration(t *testing.T) {
	b, ctx, tenants, _, kinds := noopStart(t, "nbat")
	before := b.versions(ctx, tenants)
	ids := b.queueReapply(ctx, tenants)
	w := b.worker("nbat")
	b.counter.Reset()
	b.runOnce(ctx, w)
	if byMethod, total, _, writes := b.counter.Counts(); total != kinds || byMethod[http.MethodGet] != kinds || writes != 0 {
		t.Errorf("%d re-apply jobs in one run: %d requests %v, %d writes; want %d lists (one per kind, for all of them) and no write",
			len(tenants), total, byMethod, writes, kinds)
	}
	b.idle(ctx, w, "after the batch: every job was run by it")
	b.allUnchanged(ctx, tenants, ids, before)
	for i, tn := range tenants {
		j := b.job(ctx, ids[i])
		if j.Attempts != 1 || j.Steps != len(tn.names)+1 || j.AppliedPlanHash != tn.plan.Hash() || j.LastError != "" {
			t.Errorf("re-apply job of %s = %+v; want attempt 1, %d steps of plan %s", tn.team, j, len(tn.names)+1, tn.plan.Hash())
		}
		for _, s := range b.steps(ctx, ids[i]) {
			if s.State != workflow.StepDone || s.Attempts != 1 || s.StartedAt.IsZero() || s.FinishedAt.Before(s.StartedAt) {
				t.Errorf("re-apply of %s: step %d %s = %s, attempts %d; want done once", tn.team, s.Seq, s.Name, s.State, s.Attempts)
			}
		}
		acts := auditActions(b.auditOf(ctx, tn.conn.ID))
		if got := acts[len(acts)-2:]; !slices.Equal(got, []string{"reapply.enqueue", "reapply.succeeded"}) {
			t.Errorf("audit of %s ends %v; want the re-apply queued and succeeded", tn.team, got)
		}
	}
	b.verifyAudit(ctx)
	if ch := changedVersions(before, b.versions(ctx, tenants)); len(ch) != 0 {
		t.Errorf("resourceVersions changed by the batch: %v", ch)
	}
}

// (b) The batch reads the cluster after every job's AWS steps: someone
// edits a tenant's quota while the last job's AWS step runs, long after
// the first job's AWS step; the batch re-applies it (it is not called
// unchanged from a reading older than the edit) and writes nothing else.
// Before the AWS steps it reads only the namespaces (the foreign-namespace
// check), one list.
func TestReapplyBatchReadsAfterTheAWSStepsIntegration(t *testing.T) {
	b, ctx, tenants, _, kinds := noopStart(t, "nfrs")
	before := b.versions(ctx, tenants)
	ids := b.queueReapply(ctx, tenants)
	edited := tenants[0]
	ensured := 0
	w := b.worker("nfrs")
	w.Plans = withAWSStep(b.plans)
	w.AWS = &awsStandIn{ensure: func(ctx context.Context, c awsprov.Call) (awsprov.Result, error) {
		ensured++
		if ensured == len(tenants) {
			b.doubleGPUQuota(ctx, edited)
		}
		return awsprov.Result{Action: awsprov.Unchanged}, nil
	}}
	b.counter.Reset()
	b.runOnce(ctx, w)
	b.idle(ctx, w, "after the batch")
	if ensured != len(tenants) {
		t.Fatalf("%d AWS steps ran, want %d", ensured, len(tenants))
	}
	applied := appliedBy(tenants, b.reapplied(ctx, tenants, ids))
	want := []string{fmt.Sprintf("%s: ResourceQuota %s/%s configured", edited.team, edited.plan.Namespace, provision.NameResourceQuota)}
	if !slices.Equal(applied, want) {
		t.Errorf("re-apply applied %v, want %v: the edit made during the AWS steps", applied, want)
	}
	// The namespaces' list, the snapshot's lists, and the edited quota's
	// apply (a GET and a PATCH, Applier.Apply).
	if byMethod, total, nonGet, writes := b.counter.Counts(); total != kinds+3 || nonGet != 1 || writes != 1 {
		t.Errorf("batch with AWS steps: %d requests %v, %d writes; want 1 + %d lists, then a GET and an apply of the edited quota", total, byMethod, writes, kinds)
	}
	if ch, want := changedVersions(before, b.versions(ctx, tenants)), []string{edited.team + " ResourceQuota " + edited.plan.Namespace + "/" + provision.NameResourceQuota}; !slices.Equal(ch, want) {
		t.Errorf("objects written: %v, want %v", ch, want)
	}
	for i, r := range b.applier.DriftAll(ctx, noopPlans(tenants)) {
		if r.Err != nil || len(r.Items) != 0 {
			t.Errorf("drift of %s after the batch: %v, %v", tenants[i].team, r.Items, r.Err)
		}
	}
}

// (c) A job of the batch that fails settles on its own: one fails at its
// AWS step (permanent), one at its AWS step with a transient error (a
// retry), one at a Kubernetes step (the API server rejects an object);
// the last job succeeds all the same.
func TestReapplyBatchFailuresStayTheirOwnIntegration(t *testing.T) {
	b := newWBed(t)
	ctx := t.Context()
	tenants := b.noopTenants(ctx, "nfail", 4)
	permanentAt, transientAt, rejected, fine := tenants[0], tenants[1], tenants[2], tenants[3]
	const badName = "Not_A_Valid_Name"
	plans := withAWSStep(func(ctx context.Context, id int64, v int) (provision.Plan, error) {
		p, err := b.plans(ctx, id, v)
		if err != nil || id != rejected.conn.ID {
			return p, err
		}
		for i, o := range p.Objects {
			if o.Kind == "ResourceQuota" {
				o.Obj = o.Obj.DeepCopy()
				o.Obj.SetName(badName)
				o.Name = badName
				p.Objects[i] = o
				return p, nil
			}
		}
		return p, errors.New("no ResourceQuota in the plan")
	})
	ids := b.queueReapply(ctx, tenants)
	w := b.worker("nfail")
	w.Plans = plans
	w.AWS = &awsStandIn{ensure: func(ctx context.Context, c awsprov.Call) (awsprov.Result, error) {
		switch c.Name {
		case fmt.Sprintf("quota-of-%d", permanentAt.conn.ID):
			return awsprov.Result{}, provision.Permanent(errors.New("stand-in: access denied"))
		case fmt.Sprintf("quota-of-%d", transientAt.conn.ID):
			return awsprov.Result{}, errors.New("stand-in: throttled")
		}
		return awsprov.Result{Action: awsprov.Unchanged}, nil
	}}
	b.runOnce(ctx, w)

	for _, c := range []struct {
		tn    wintTenant
		id    int64
		state workflow.JobState
		err   string
	}{
		{permanentAt, ids[0], workflow.JobFailed, "access denied"},
		{transientAt, ids[1], workflow.JobQueued, "throttled"},
		{rejected, ids[2], workflow.JobFailed, badName},
		{fine, ids[3], workflow.JobSucceeded, ""},
	} {
		j := b.job(ctx, c.id)
		if j.State != c.state || j.Attempts != 1 || !strings.Contains(j.LastError, c.err) {
			t.Errorf("re-apply job of %s = %s (attempt %d) %q; want %s with %q", c.tn.team, j.State, j.Attempts, j.LastError, c.state, c.err)
		}
		if s := b.state(ctx, c.tn.conn.ID); s != workflow.StateActive {
			t.Errorf("%s is %s after its re-apply, want active", c.tn.team, s)
		}
	}
	// The failed Kubernetes step is recorded as such; the steps before it
	// are done, those after it never started.
	ss := b.steps(ctx, ids[2])
	at := slices.IndexFunc(ss, func(s workflow.JobStep) bool { return s.State == workflow.StepFailed })
	if at < 1 || !strings.Contains(ss[at].Name, badName) {
		t.Fatalf("steps of the rejected job: %+v; want its quota step failed", ss)
	}
	for _, s := range ss[:at] {
		if s.State != workflow.StepDone {
			t.Errorf("rejected job: step %s = %s before the failed one; want done", s.Name, s.State)
		}
	}
	for _, s := range ss[at+1:] {
		if s.State != workflow.StepPending || s.Attempts != 0 {
			t.Errorf("rejected job: step %s = %s (attempts %d) after the failed one; want pending", s.Name, s.State, s.Attempts)
		}
	}
	if acts := auditActions(b.auditOf(ctx, fine.conn.ID)); acts[len(acts)-1] != "reapply.succeeded" {
		t.Errorf("audit of %s ends %v", fine.team, acts[len(acts)-1])
	}
	if acts := auditActions(b.auditOf(ctx, permanentAt.conn.ID)); acts[len(acts)-1] != "reapply.failed" {
		t.Errorf("audit of %s ends %v", permanentAt.team, acts[len(acts)-1])
	}
	b.verifyAudit(ctx)
}

// (d) A shutdown during the batch hands every unfinished job back to the
// queue, due at once: the one whose AWS step was running when the worker
// was told to stop finishes that step, and no further step of any job
// starts.
func TestReapplyBatchShutdownHandsBackIntegration(t *testing.T) {
	b := newWBed(t)
	tenants := b.noopTenants(t.Context(), "nstop", 3)
	ids := b.queueReapply(t.Context(), tenants)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ensured := 0
	w := b.worker("nstop")
	w.Plans = withAWSStep(b.plans)
	w.AWS = &awsStandIn{ensure: func(context.Context, awsprov.Call) (awsprov.Result, error) {
		ensured++
		if ensured == 2 {
			cancel() // the worker is told to stop during the second job's AWS step
		}
		return awsprov.Result{Action: awsprov.Unchanged}, nil
	}}
	if did, err := w.RunOnce(ctx); !did || err != nil {
		t.Fatalf("RunOnce = %v, %v; want the batch run and handed back", did, err)
	}
	for i, id := range ids {
		j := b.job(t.Context(), id)
		if j.State != workflow.JobQueued || !j.NotBefore.Equal(b.clock.Now()) || !strings.Contains(j.LastError, "the worker stopped") {
			t.Errorf("job of %s = %s due %s %q; want queued, due now, handed back", tenants[i].team, j.State, j.NotBefore, j.LastError)
		}
		for _, s := range b.steps(t.Context(), id) {
			want := workflow.StepPending
			if s.Seq == 0 && i < 2 {
				want = workflow.StepDone // its AWS step ran
			}
			if s.State != want {
				t.Errorf("job of %s: step %d %s = %s; want %s", tenants[i].team, s.Seq, s.Name, s.State, want)
			}
		}
	}
	if ensured != 2 {
		t.Errorf("%d AWS steps ran, want 2: none after the stop", ensured)
	}
	// The next worker resumes them all at once.
	w2 := b.worker("nstop2")
	w2.Plans = withAWSStep(b.plans)
	w2.AWS = &awsStandIn{ensure: func(context.Context, awsprov.Call) (awsprov.Result, error) {
		return awsprov.Result{Action: awsprov.Unchanged}, nil
	}}
	b.runOnce(t.Context(), w2)
	for i, id := range ids {
		if j := b.job(t.Context(), id); j.State != workflow.JobSucceeded || j.Attempts != 2 {
			t.Errorf("job of %s after the next worker = %s at attempt %d; want succeeded at attempt 2", tenants[i].team, j.State, j.Attempts)
		}
	}
}
