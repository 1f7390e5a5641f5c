package provision_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// RunStep makes fakeCluster a RevocationApplier: it records the step's
// name and fails as told, by object name.
func (f *fakeCluster) RunStep(ctx context.Context, s provision.Step) (provision.Outcome, string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, s.Name())
	var err error
	if errs := f.fail[s.Object.Name]; len(errs) > 0 && s.Object.Name != "" {
		err, f.fail[s.Object.Name] = errs[0], errs[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return provision.Failed, "", fmt.Errorf("provision: %s: %w", s.Name(), err)
	}
	return provision.Deleted, "", nil
}

var _ provision.RevocationApplier = (*fakeCluster)(nil)

// provisioned runs the bed's provisioning job on cluster: the connection
// is active.
func (b *bed) provisioned(cluster *fakeCluster) {
	b.t.Helper()
	b.runOnce(b.worker("provisioner", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		b.t.Fatalf("connection %s after provisioning, want active", s)
	}
	cluster.mu.Lock()
	cluster.calls = nil
	cluster.mu.Unlock()
}

// revoke revokes the bed's connection and returns the revoke job.
func (b *bed) revoke() workflow.Job {
	b.t.Helper()
	_, j, err := b.db.Revoke(b.t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "end of project", b.clock.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	return j
}

// revocationNames are the step names the bed's revocation runs.
func (b *bed) revocationNames() []string {
	var out []string
	for _, s := range provision.RevocationPlan(b.plan, b.plan.OnRevoke) {
		out = append(out, s.Name())
	}
	return out
}

func (b *bed) assertRevocationSteps(jobID int64, outcome string, attempts func(int) int) {
	b.t.Helper()
	names := b.revocationNames()
	ss := b.steps(jobID)
	if len(ss) != len(names) {
		b.t.Fatalf("%d step rows, want %d", len(ss), len(names))
	}
	for i, s := range ss {
		if s.Name != names[i] || s.State != workflow.StepDone || s.Outcome != outcome || s.Attempts != attempts(i) {
			b.t.Errorf("step %d = %s %s %s attempts %d; want %s done %s attempts %d", i, s.Name, s.State, s.Outcome, s.Attempts, names[i], outcome, attempts(i))
		}
	}
}

var revoked = append(slices.Clone(provisioned), "connection.revoke", "revocation.start", "revocation.done")

func TestWorkerRevokes(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	b.provisioned(cluster)
	j := b.revoke()
	w := b.worker("w1", cluster)
	b.runOnce(w)

	names := b.revocationNames()
	if !slices.Equal(cluster.calls, names) {
		t.Errorf("ran %v, want the revocation in order %v", cluster.calls, names)
	}
	// Access goes first: every RoleBinding step comes before any other.
	lastBinding, firstOther := -1, len(cluster.calls)
	for i, c := range cluster.calls {
		if strings.Contains(c, "RoleBinding") {
			lastBinding = i
		} else if i < firstOther {
			firstOther = i
		}
	}
	if lastBinding < 0 || lastBinding > firstOther {
		t.Errorf("steps %v: the RoleBindings are not removed before everything else", cluster.calls)
	}
	// The default mode locks the namespace, then its admission
	// parameters go (see RevocationPlan).
	if got := cluster.calls[len(cluster.calls)-2:]; !strings.HasPrefix(got[0], "lock Namespace ") || !strings.HasPrefix(got[1], "delete ConfigMap ") {
		t.Errorf("last steps %q, want the namespace locked (the default mode), then the admission parameters deleted", got)
	}
	if got := b.jobNow(j.ID); got.State != workflow.JobSucceeded || got.Steps != len(names) || got.AppliedPlanHash == "" || got.DryRun {
		t.Errorf("job = %+v, want succeeded with %d steps", got, len(names))
	}
	b.assertRevocationSteps(j.ID, string(provision.Deleted), once)
	if s := b.state(b.conn.ID); s != workflow.StateRevoked {
		t.Errorf("connection %s, want revoked", s)
	}
	if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, revoked) {
		t.Errorf("audit = %v, want %v", acts, revoked)
	}
	b.verifyAudit()
	b.idle(w, "with the queue empty")
}

func TestWorkerRevocationRetriesAndFails(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	b.provisioned(cluster)
	j := b.revoke()
	gr := schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}
	cluster.fail = map[string][]error{
		provision.NameViewerRole: {apierrors.NewServiceUnavailable("apiserver restarting"), apierrors.NewForbidden(gr, provision.NameViewerRole, errors.New("the portal may not delete roles"))},
	}
	w := b.worker("w1", cluster)

	b.runOnce(w) // transient: retried with backoff, still revoking
	if got := b.jobNow(j.ID); got.State != workflow.JobQueued || !strings.Contains(got.LastError, "apiserver restarting") || !got.NotBefore.Equal(b.clock.Now().Add(10*time.Second)) {
		t.Errorf("after a transient error: job %+v, want queued 10s later", got)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoking {
		t.Errorf("connection %s during retries, want revoking", s)
	}
	b.clock.Add(10 * time.Second)
	b.runOnce(w) // permanent: failed, still revoking, the server's message recorded
	got := b.jobNow(j.ID)
	if got.State != workflow.JobFailed || !strings.Contains(got.LastError, "the portal may not delete roles") || got.Attempts != 2 {
		t.Errorf("after a permanent error: job %+v, want failed with the server's message", got)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoking {
		t.Errorf("connection %s after a failed revocation, want revoking: never back to active", s)
	}
	evs := b.audit(b.conn.ID)
	if last := evs[len(evs)-1]; last.Action != "revocation.failed" || !strings.Contains(last.Reason, "may not delete roles") {
		t.Errorf("last audit event %s %q, want revocation.failed with the reason", last.Action, last.Reason)
	}

	// An admin fixes the cause and queues the revocation again.
	again, err := b.db.EnqueueRevocation(t.Context(), b.conn.ID, workflow.Actor{Email: "admin@example.test"}, "RBAC fixed", b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.runOnce(w)
	if got := b.jobNow(again.ID); got.State != workflow.JobSucceeded {
		t.Errorf("retried revocation = %+v, want succeeded", got)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoked {
		t.Errorf("connection %s, want revoked", s)
	}
	b.verifyAudit()
}

func TestWorkerRevocationDryRun(t *testing.T) {
	t.Run("nothing was ever applied", func(t *testing.T) {
		b := newBed(t)
		dry := b.worker("dry", nil)
		dry.DryRun = true
		b.runOnce(dry) // the provisioning dry run: the connection stays approved
		j := b.revoke()
		b.runOnce(dry)
		got := b.jobNow(j.ID)
		if got.State != workflow.JobSucceeded || !got.DryRun {
			t.Errorf("job = %+v, want a succeeded dry run", got)
		}
		b.assertRevocationSteps(j.ID, string(provision.DryRunOutcome), once)
		steps := provision.RevocationPlan(b.plan, b.plan.OnRevoke)
		for i, s := range b.steps(j.ID) {
			if s.Detail != steps[i].Detail || s.Detail == "" {
				t.Errorf("step %d detail %q, want %q", i, s.Detail, steps[i].Detail)
			}
		}
		if s := b.state(b.conn.ID); s != workflow.StateRevoked {
			t.Errorf("connection %s, want revoked: there was nothing to remove", s)
		}
	})
	t.Run("the connection was provisioned for real", func(t *testing.T) {
		b := newBed(t)
		b.provisioned(&fakeCluster{})
		b.revoke()
		dry := b.worker("dry", nil)
		dry.DryRun = true
		b.runOnce(dry)
		if s := b.state(b.conn.ID); s != workflow.StateRevoking {
			t.Errorf("connection %s after a dry run, want revoking: its objects were never removed", s)
		}
		b.verifyAudit()
	})
}

// A worker dies after revocation step k (for every k); another resumes the
// job once the lease has expired and runs every step again.
func TestWorkerRevocationResumesAfterACrash(t *testing.T) {
	t.Parallel() // its own run id, database and tenants; one of the longest, run beside the others (make test, -parallel)
	probe := newBed(t)
	for crash := range len(probe.revocationNames()) {
		t.Run(fmt.Sprintf("after step %d", crash), func(t *testing.T) {
			b := newBed(t)
			cluster := &fakeCluster{}
			b.provisioned(cluster)
			j := b.revoke()
			dying := b.worker("dying", cluster)
			dying.AfterStep = func(seq int) error {
				if seq == crash {
					return errCrash
				}
				return nil
			}
			if did, err := dying.RunOnce(t.Context()); !did || !errors.Is(err, errCrash) {
				t.Fatalf("RunOnce = %v, %v; want the crash", did, err)
			}
			if s := b.state(b.conn.ID); s != workflow.StateRevoking {
				t.Errorf("connection %s mid-revocation, want revoking", s)
			}
			next := b.worker("next", cluster)
			b.clock.Add(59 * time.Second)
			b.idle(next, "while the lease holds")
			b.clock.Add(time.Second)
			b.runOnce(next)

			if got := b.jobNow(j.ID); got.State != workflow.JobSucceeded || got.Attempts != 2 {
				t.Errorf("job = %+v, want succeeded at attempt 2", got)
			}
			b.assertRevocationSteps(j.ID, string(provision.Deleted), func(seq int) int {
				if seq <= crash {
					return 2
				}
				return 1
			})
			for i, name := range b.revocationNames() {
				want := 1
				if i <= crash {
					want = 2
				}
				if n := cluster.count(name); n != want {
					t.Errorf("%s run %d times, want %d", name, n, want)
				}
			}
			if s := b.state(b.conn.ID); s != workflow.StateRevoked {
				t.Errorf("connection %s, want revoked", s)
			}
			if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, revoked) {
				t.Errorf("audit = %v, want %v (one start, one done)", acts, revoked)
			}
			b.verifyAudit()
		})
	}
}

// Revoking while the provisioning job runs: that job's worker stops at its
// next write, and the revocation starts only once its lease has expired,
// so the two never touch the cluster at once.
func TestWorkerRevocationWaitsForARunningProvisioning(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	var rj workflow.Job
	slow := b.worker("slow", cluster)
	slow.AfterStep = func(seq int) error {
		if seq == 2 {
			rj = b.revoke()
		}
		return nil
	}
	if did, err := slow.RunOnce(t.Context()); !did || !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("RunOnce = %v, %v; want the provisioning worker stopped by ErrLeaseLost", did, err)
	}
	if n := len(cluster.calls); n != 3 {
		t.Errorf("provisioning applied %d objects, want 3: nothing after the revocation", n)
	}
	if got := b.jobNow(b.job.ID); got.State != workflow.JobFailed || !strings.Contains(got.LastError, "being revoked") {
		t.Errorf("provisioning job = %+v, want failed as cancelled", got)
	}
	w := b.worker("w1", cluster)
	b.clock.Add(time.Minute - time.Nanosecond)
	b.idle(w, "before the provisioning lease expires")
	b.clock.Add(time.Nanosecond)
	b.runOnce(w)
	if got := b.jobNow(rj.ID); got.State != workflow.JobSucceeded {
		t.Errorf("revoke job = %+v, want succeeded", got)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoked {
		t.Errorf("connection %s, want revoked", s)
	}
	want := []string{"connection.create", "connection.submit", "connection.approve", "provisioning.start",
		"connection.revoke", "provisioning.cancelled", "revocation.start", "revocation.done"}
	if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, want) {
		t.Errorf("audit = %v, want %v", acts, want)
	}
	b.verifyAudit()
}

// A Slurm connection's revocation is one step, slurmprov.Revoke through
// the worker's Slurm transport: here the accounting holds nothing of the
// team, so the step reads it and removes nothing.
func TestWorkerRevokesASlurmConnection(t *testing.T) {
	b := newBed(t)
	j := b.revoke()
	w := b.worker("w1", &fakeCluster{})
	sp := slurmprov.Plan{Cluster: "hp", Parent: slurmprov.Account{Name: "hyperpod-portal"}, QoS: slurmprov.QoS{Name: "red-gpu"},
		Account: slurmprov.Account{Name: "red", Parent: "hyperpod-portal"}}
	w.Plans = func(_ context.Context, id int64, v int) (provision.Plan, error) {
		return provision.Plan{ConnectionID: id, ContractVersion: v, Slurm: &sp}, nil
	}
	empty := emptyAccounting{}
	w.Slurm = &empty
	b.runOnce(w)
	ss := b.steps(j.ID)
	if got := b.jobNow(j.ID); got.State != workflow.JobSucceeded || len(ss) != 1 || !strings.HasPrefix(ss[0].Name, "sacctmgr: remove") || ss[0].Outcome != string(provision.Absent) {
		t.Errorf("job = %+v, steps %+v; want one Slurm revocation step that found nothing", got, ss)
	}
	if empty.writes != 0 || empty.reads == 0 {
		t.Errorf("the accounting was read %d times and written %d; want read, never written", empty.reads, empty.writes)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoked {
		t.Errorf("connection %s, want revoked", s)
	}
}

// emptyAccounting is a Slurm accounting database with nothing in it: every
// sacctmgr show prints its header alone.
type emptyAccounting struct{ reads, writes int }

func (e *emptyAccounting) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	if name != "sacctmgr" || len(args) < 3 || args[1] != "show" {
		e.writes++
		return nil, fmt.Errorf("unexpected %s %v", name, args)
	}
	e.reads++
	format := args[len(args)-1]
	return []byte(strings.ReplaceAll(strings.TrimPrefix(format, "format="), ",", "|") + "\n"), nil
}

// An applier that cannot delete fails a revocation at once instead of
// pretending.
func TestWorkerRevocationNeedsARevocationApplier(t *testing.T) {
	b := newBed(t)
	j := b.revoke()
	b.runOnce(b.worker("w1", applyOnly{}))
	if got := b.jobNow(j.ID); got.State != workflow.JobFailed || !strings.Contains(got.LastError, "cannot delete") {
		t.Errorf("job = %+v, want failed: the applier cannot delete", got)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoking {
		t.Errorf("connection %s, want revoking", s)
	}
}

type applyOnly struct{}

func (applyOnly) ApplyObject(context.Context, provision.Object) (provision.Outcome, string, error) {
	return provision.Created, "", nil
}

// adoptingCluster is fakeCluster recording which applied objects carried
// an admin's adoption.
type adoptingCluster struct {
	*fakeCluster
	adopted []string
}

func (a *adoptingCluster) ApplyObject(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
	if o.Adopt {
		a.adopted = append(a.adopted, o.Kind+" "+o.Ref())
	}
	return a.fakeCluster.ApplyObject(ctx, o)
}

// An adopted namespace (issue 10 item 14): the provisioning job hands the
// adoption to the namespace step alone, and revocation in delete mode
// locks the namespace instead of deleting it, since it existed before the
// connection.
func TestWorkerCarriesTheNamespaceAdoption(t *testing.T) {
	s := provision.DefaultClusterSettings()
	s.ClusterQueueManagedByPortal = true
	s.OnRevoke = provision.RevokeDelete
	b := newBedWith(t, s, adopting("hyperpod-ns-red"))
	if b.job.AdoptNamespace != b.plan.Namespace {
		t.Fatalf("the approval's job adopts %q, want %s", b.job.AdoptNamespace, b.plan.Namespace)
	}
	cluster := &adoptingCluster{fakeCluster: &fakeCluster{}}
	b.runOnce(b.worker("provisioner", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Fatalf("connection %s, want active", s)
	}
	if want := []string{"Namespace " + b.plan.Namespace}; !slices.Equal(cluster.adopted, want) {
		t.Errorf("adopted objects applied: %v, want %v", cluster.adopted, want)
	}
	cluster.calls = nil
	b.revoke()
	b.runOnce(b.worker("revoker", cluster))
	var nsSteps []string
	for _, c := range cluster.calls {
		if strings.Contains(c, "Namespace "+b.plan.Namespace) {
			nsSteps = append(nsSteps, c)
		}
	}
	if len(nsSteps) != 1 || !strings.HasPrefix(nsSteps[0], "lock") {
		t.Errorf("revocation's namespace steps %v, want one lock (never a delete)", nsSteps)
	}
}

// foreignCluster is a StepApplier on whose cluster the plan's namespace
// exists and is foreign (provision.NamespaceChecker).
type foreignCluster struct{ *fakeCluster }

func (foreignCluster) CheckNamespace(_ context.Context, p provision.Plan) (provision.NamespaceCheck, error) {
	return provision.NamespaceCheck{Namespace: p.Namespace, Exists: true, Foreign: true}, nil
}

// The worker reads the namespace before the job's first step: a foreign
// one nobody adopted fails the job permanently with nothing applied (no
// AWS call either); an adopted one is provisioned.
func TestWorkerRefusesAForeignNamespaceBeforeAnyStep(t *testing.T) {
	b := newBed(t)
	cluster := foreignCluster{&fakeCluster{}}
	b.runOnce(b.worker("provisioner", cluster))
	j, err := b.db.Job(t.Context(), b.job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "adopts it explicitly") || len(cluster.calls) != 0 {
		t.Errorf("job %s %q, calls %v; want failed before any step", j.State, j.LastError, cluster.calls)
	}

	b = newBed(t, adopting("hyperpod-ns-red"))
	cluster = foreignCluster{&fakeCluster{}}
	b.runOnce(b.worker("provisioner", cluster))
	if s := b.state(b.conn.ID); s != workflow.StateActive || len(cluster.calls) == 0 {
		t.Errorf("adopted: connection %s after %d calls, want active", s, len(cluster.calls))
	}
}
