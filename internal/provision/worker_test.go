package provision_test

// These tests run the worker on the real store (SQLite in a temporary
// directory) with a fake StepApplier: what the cluster does is scripted,
// what the portal records is real. The import of internal/store is the
// wiring cmd/portal does; provision's own files never import it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// *store.DB is the worker's queue and AWS recorder directly, as in
// cmd/portal: the job and AWS record types are workflow's.
var (
	_ provision.JobStore    = (*store.DB)(nil)
	_ provision.AWSRecorder = (*store.DB)(nil)
	// Re-apply jobs run in batches (reapplybatch.go).
	_ provision.JobBatchClaimer = (*store.DB)(nil)
	_ provision.StepsRecorder   = (*store.DB)(nil)
)

// clock is a manual clock shared by the workers of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeCluster is a StepApplier that records each call and fails the calls
// it was told to, by object name, in order.
type fakeCluster struct {
	mu      sync.Mutex
	calls   []string           // "Kind ref" per call
	fail    map[string][]error // object name -> errors for its next calls
	onApply func(n int)        // called with the number of calls so far
}

func (f *fakeCluster) ApplyObject(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, o.Kind+" "+o.Ref())
	n := len(f.calls)
	var err error
	if errs := f.fail[o.Name]; len(errs) > 0 {
		err, f.fail[o.Name] = errs[0], errs[1:]
	}
	hook := f.onApply
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if err != nil {
		return provision.Failed, "", fmt.Errorf("provision: apply %s %s: %w", o.Kind, o.Ref(), err)
	}
	return provision.Created, "resourceVersion 1", nil
}

func (f *fakeCluster) count(ref string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == ref {
			n++
		}
	}
	return n
}

// bed is a migrated database with one approved connection and its queued
// job, the plan that job will apply, and a worker factory.
type bed struct {
	t        *testing.T
	settings provision.ClusterSettings
	db       *store.DB
	clock    *clock
	conn     store.Connection
	job      workflow.Job
	plan     provision.Plan
	names    []string
}

var settings = provision.DefaultClusterSettings()

func newBed(t *testing.T, opts ...bedOption) *bed {
	t.Helper()
	return newBedWith(t, settings, opts...)
}

// bedFiling is how a bed's first connection is filed and approved
// (bedOption). A field of each bed, not a package variable: tests that
// call t.Parallel file theirs at the same time.
type bedFiling struct {
	edit  func(*workflow.Contract) // changes the contract filed (the approval pins its plan)
	adopt string                   // the namespace the approval adopts
}

type bedOption func(*bedFiling)

// withContract files the bed's connection with the contract edit changed.
func withContract(edit func(*workflow.Contract)) bedOption {
	return func(f *bedFiling) { f.edit = edit }
}

// adopting has the bed's approval adopt namespace ns.
func adopting(ns string) bedOption { return func(f *bedFiling) { f.adopt = ns } }

// newBedWith is newBed with other cluster settings.
func newBedWith(t *testing.T, settings provision.ClusterSettings, opts ...bedOption) *bed {
	t.Helper()
	ctx := t.Context()
	db, err := store.OpenMigrated(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	roomyCluster(t, db)
	b := &bed{t: t, settings: settings, db: db, clock: &clock{t: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}}
	var filing bedFiling
	for _, o := range opts {
		o(&filing)
	}
	b.conn, b.job = b.approveFiled("red", filing)
	ver, err := db.Version(ctx, b.conn.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.plan, err = provision.BuildPlan(b.conn.ID, 1, ver.Hash, ver.Contract, settings); err != nil {
		t.Fatal(err)
	}
	if len(b.plan.Objects) < 4 && b.plan.Slurm == nil {
		t.Fatalf("plan has %d objects; the tests want a few", len(b.plan.Objects))
	}
	for _, o := range b.plan.Objects {
		b.names = append(b.names, o.Kind+" "+o.Ref())
	}
	return b
}

// approve creates, submits and approves a connection for team.
func (b *bed) approve(team string) (store.Connection, workflow.Job) {
	b.t.Helper()
	return b.approveFiled(team, bedFiling{})
}

// approveFiled is approve with the contract and approval f says.
func (b *bed) approveFiled(team string, f bedFiling) (store.Connection, workflow.Job) {
	b.t.Helper()
	ctx := b.t.Context()
	u, err := b.db.RecordLogin(ctx, "https://idp.example.test", "u-"+team, team+"@example.test", team, nil, b.clock.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	by := workflow.Actor{ID: u.ID, Email: u.Email}
	c := workflow.ExampleContractFor(team)
	if f.edit != nil {
		f.edit(&c)
	}
	conn, err := b.db.CreateConnection(ctx, c, by, b.clock.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.db.Transition(ctx, conn.ID, workflow.EventSubmit, by, "", store.Expect{}, b.clock.Now()); err != nil {
		b.t.Fatal(err)
	}
	ver, err := b.db.Version(ctx, conn.ID, 1)
	if err != nil {
		b.t.Fatal(err)
	}
	plan, err := provision.BuildPlan(conn.ID, 1, ver.Hash, ver.Contract, b.settings)
	if err != nil {
		b.t.Fatal(err)
	}
	// An admin independent of the request approves it.
	a, err := b.db.RecordLogin(ctx, "https://idp.example.test", "admin-"+team, "admin-"+team+"@example.test", "admin", nil, b.clock.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	if conn, _, err = b.db.Approve(ctx, conn.ID, workflow.Actor{ID: a.ID, Email: a.Email}, store.Expect{Version: 1, Hash: ver.Hash, PlanHash: plan.Hash(), Adopt: f.adopt}, "ok", workflow.ClusterFacts{}, b.clock.Now()); err != nil {
		b.t.Fatal(err)
	}
	jobs, err := b.db.JobsFor(ctx, conn.ID)
	if err != nil || len(jobs) != 1 {
		b.t.Fatalf("JobsFor = %+v, %v; want the job the approval queued", jobs, err)
	}
	return conn, jobs[0]
}

func (b *bed) worker(owner string, apply provision.StepApplier) *provision.Worker {
	return &provision.Worker{
		Store: b.db,
		Plans: provision.PlansFrom(func(ctx context.Context, id int64, v int) (workflow.Contract, string, error) {
			ver, err := b.db.Version(ctx, id, v)
			return ver.Contract, ver.Hash, err
		}, b.settings),
		// As cmd/portal's connectionFacts reads it.
		Connection: func(ctx context.Context, id int64) (provision.ConnectionFacts, error) {
			c, err := b.db.Connection(ctx, id)
			return provision.ConnectionFacts{Hold: c.Hold, ApprovedVersion: c.ApprovedVersion, CurrentVersion: c.CurrentVersion, Amendment: c.Amendment}, err
		},
		Apply:      apply,
		Clock:      b.clock.Now,
		Owner:      owner,
		Lease:      time.Minute,
		Backoff:    10 * time.Second,
		MaxBackoff: 15 * time.Second,
	}
}

func (b *bed) runOnce(w *provision.Worker) {
	b.t.Helper()
	did, err := w.RunOnce(b.t.Context())
	if err != nil || !did {
		b.t.Fatalf("RunOnce = %v, %v; want a job run", did, err)
	}
}

func (b *bed) idle(w *provision.Worker, why string) {
	b.t.Helper()
	if did, err := w.RunOnce(b.t.Context()); did || err != nil {
		b.t.Errorf("RunOnce %s = %v, %v; want no job", why, did, err)
	}
}

func (b *bed) jobNow(id int64) workflow.Job {
	b.t.Helper()
	j, err := b.db.Job(b.t.Context(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return j
}

func (b *bed) steps(id int64) []workflow.JobStep {
	b.t.Helper()
	s, err := b.db.JobSteps(b.t.Context(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *bed) state(id int64) workflow.State {
	b.t.Helper()
	c, err := b.db.Connection(b.t.Context(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return c.State
}

func (b *bed) audit(connID int64) []store.AuditEvent {
	b.t.Helper()
	evs, err := b.db.AuditEvents(b.t.Context(), store.AuditFilter{ObjectType: "connection", ObjectID: connID}, 0, 100)
	if err != nil {
		b.t.Fatal(err)
	}
	slices.Reverse(evs)
	return evs
}

func actions(evs []store.AuditEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Action)
	}
	return out
}

func (b *bed) verifyAudit() {
	b.t.Helper()
	if n, brk, err := b.db.VerifyAudit(b.t.Context()); err != nil || brk != nil {
		b.t.Errorf("VerifyAudit = %d, %+v, %v; want an intact chain", n, brk, err)
	}
}

// assertSteps checks every step's name, state, outcome and attempt count.
func (b *bed) assertSteps(jobID int64, state workflow.StepState, outcome string, attempts func(seq int) int) {
	b.t.Helper()
	ss := b.steps(jobID)
	if len(ss) != len(b.names) {
		b.t.Fatalf("%d step rows, want one per plan object (%d)", len(ss), len(b.names))
	}
	for i, s := range ss {
		if s.Seq != i || s.Name != b.names[i] || s.State != state || s.Outcome != outcome || s.Attempts != attempts(i) {
			b.t.Errorf("step %d = %s %s %s attempts %d; want %s %s %s attempts %d",
				i, s.Name, s.State, s.Outcome, s.Attempts, b.names[i], state, outcome, attempts(i))
		}
	}
}

func once(int) int { return 1 }

var provisioned = []string{"connection.create", "connection.submit", "connection.approve", "provisioning.start", "provisioning.succeeded"}

func TestWorkerProvisions(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	w := b.worker("w1", cluster)
	b.runOnce(w)

	if !slices.Equal(cluster.calls, b.names) {
		t.Errorf("applied %v, want the plan in order %v", cluster.calls, b.names)
	}
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobSucceeded || j.Attempts != 1 || j.AppliedPlanHash != b.plan.Hash() || j.Steps != len(b.names) || j.DryRun {
		t.Errorf("job = %+v, want succeeded at attempt 1 with plan %s", j, b.plan.Hash())
	}
	b.assertSteps(b.job.ID, workflow.StepDone, "created", once)
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Errorf("connection %s, want active", s)
	}
	if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, provisioned) {
		t.Errorf("audit = %v, want %v", acts, provisioned)
	}
	b.verifyAudit()
	b.idle(w, "with the queue empty")
}

func TestWorkerRetriesTransientErrors(t *testing.T) {
	b := newBed(t)
	failing := b.plan.Objects[2]
	unavailable := apierrors.NewServiceUnavailable("apiserver restarting")
	cluster := &fakeCluster{fail: map[string][]error{failing.Name: {unavailable, unavailable, unavailable}}}
	w := b.worker("w1", cluster)

	// Backoff 10s, doubling, capped at 15s.
	for attempt, delay := range []time.Duration{10 * time.Second, 15 * time.Second, 15 * time.Second} {
		b.runOnce(w)
		j := b.jobNow(b.job.ID)
		if j.State != workflow.JobQueued || j.Attempts != attempt+1 || !j.NotBefore.Equal(b.clock.Now().Add(delay)) ||
			!strings.Contains(j.LastError, "apiserver restarting") {
			t.Fatalf("after attempt %d: job %+v; want queued for %s later with the error", attempt+1, j, delay)
		}
		if s := b.state(b.conn.ID); s != workflow.StateProvisioning {
			t.Errorf("connection %s during retries, want provisioning", s)
		}
		if ss := b.steps(b.job.ID); ss[2].State != workflow.StepFailed || !strings.Contains(ss[2].Detail, "apiserver restarting") || ss[3].State != workflow.StepPending {
			t.Errorf("steps after attempt %d: %+v", attempt+1, ss[:4])
		}
		b.clock.Add(delay - time.Nanosecond)
		b.idle(w, "before the retry is due")
		b.clock.Add(time.Nanosecond)
	}
	b.runOnce(w)

	if j := b.jobNow(b.job.ID); j.State != workflow.JobSucceeded || j.Attempts != 4 {
		t.Errorf("job = %+v, want succeeded at attempt 4", j)
	}
	b.assertSteps(b.job.ID, workflow.StepDone, "created", func(seq int) int {
		if seq <= 2 {
			return 4
		}
		return 1
	})
	if n := cluster.count(b.names[0]); n != 4 {
		t.Errorf("%s applied %d times, want 4 (every attempt re-applies)", b.names[0], n)
	}
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Errorf("connection %s, want active", s)
	}
	if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, provisioned) {
		t.Errorf("audit = %v, want %v", acts, provisioned)
	}
	b.verifyAudit()
}

func TestWorkerGivesUpAfterMaxAttempts(t *testing.T) {
	b := newBed(t)
	throttled := apierrors.NewTooManyRequests("slow down", 1)
	cluster := &fakeCluster{fail: map[string][]error{b.plan.Objects[1].Name: slices.Repeat([]error{throttled}, 10)}}
	w := b.worker("w1", cluster)
	w.MaxAttempts = 3
	for range 3 {
		b.clock.Add(time.Hour)
		b.runOnce(w)
	}
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || j.Attempts != 3 || !strings.Contains(j.LastError, "gave up after 3 attempts") || !strings.Contains(j.LastError, "slow down") {
		t.Errorf("job = %+v, want failed after 3 attempts with the last error", j)
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s, want approved", s)
	}
	b.clock.Add(time.Hour)
	b.idle(w, "after the job failed")
}

func TestWorkerFailsOnPermanentError(t *testing.T) {
	b := newBed(t)
	at := 3
	o := b.plan.Objects[at]
	invalid := apierrors.NewInvalid(o.Obj.GroupVersionKind().GroupKind(), o.Name,
		field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), o.Name, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters")})
	cluster := &fakeCluster{fail: map[string][]error{o.Name: {invalid}}}
	w := b.worker("w1", cluster)
	b.runOnce(w)

	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || j.Attempts != 1 || !strings.Contains(j.LastError, invalid.Error()) {
		t.Errorf("job = %+v, want failed at once with the server's message %q", j, invalid.Error())
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s, want back to approved", s)
	}
	ss := b.steps(b.job.ID)
	for i, s := range ss {
		want := workflow.StepDone
		switch {
		case i == at:
			want = workflow.StepFailed
		case i > at:
			want = workflow.StepPending
		}
		if s.State != want {
			t.Errorf("step %d (%s) %s, want %s", i, s.Name, s.State, want)
		}
	}
	if len(cluster.calls) != at+1 {
		t.Errorf("%d objects applied, want %d: nothing after the failure", len(cluster.calls), at+1)
	}
	evs := b.audit(b.conn.ID)
	last := evs[len(evs)-1]
	if last.Action != "provisioning.failed" || !strings.Contains(last.Reason, invalid.Error()) {
		t.Errorf("last audit event = %s %q, want provisioning.failed with the server's message", last.Action, last.Reason)
	}
	b.verifyAudit()
	b.clock.Add(time.Hour)
	b.idle(w, "after a permanent failure")
}

// writeCounter is the store with its step writes counted: embedding
// *store.DB, it has every method the worker looks for.
type writeCounter struct {
	*store.DB
	mu     sync.Mutex
	writes map[string]int
}

func (c *writeCounter) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes[name]++
}

func (c *writeCounter) ExtendLease(ctx context.Context, jobID int64, owner string, now time.Time, lease time.Duration) error {
	c.count("ExtendLease")
	return c.DB.ExtendLease(ctx, jobID, owner, now, lease)
}

func (c *writeCounter) StepStarted(ctx context.Context, jobID int64, owner string, seq int, name string, now time.Time) error {
	c.count("StepStarted")
	return c.DB.StepStarted(ctx, jobID, owner, seq, name, now)
}

func (c *writeCounter) StartStep(ctx context.Context, jobID int64, owner string, seq int, name string, now time.Time, lease time.Duration) error {
	c.count("StartStep")
	return c.DB.StartStep(ctx, jobID, owner, seq, name, now, lease)
}

func (c *writeCounter) StepFinished(ctx context.Context, jobID int64, owner string, seq int, name, outcome, detail string, now time.Time) error {
	c.count("StepFinished")
	return c.DB.StepFinished(ctx, jobID, owner, seq, name, outcome, detail, now)
}

// The worker writes twice per step on the portal's store (issue 15): one
// transaction as the step starts, renewing the lease (StartStep), one as it
// ends; never ExtendLease and StepStarted apart.
func TestWorkerWritesTwicePerStep(t *testing.T) {
	b := newBed(t)
	counted := &writeCounter{DB: b.db, writes: map[string]int{}}
	w := b.worker("w1", &fakeCluster{})
	w.Store = counted
	w.Heartbeat = time.Hour // the heartbeat's renewals are not the steps'
	b.runOnce(w)
	n := len(b.names)
	want := map[string]int{"StartStep": n, "StepFinished": n}
	if !maps.Equal(counted.writes, want) {
		t.Errorf("step writes %v, want %v", counted.writes, want)
	}
	b.assertSteps(b.job.ID, workflow.StepDone, "created", once)
}

func TestWorkerDryRun(t *testing.T) {
	b := newBed(t)
	w := b.worker("w1", nil)
	w.DryRun = true
	b.runOnce(w)

	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobSucceeded || !j.DryRun || j.AppliedPlanHash != b.plan.Hash() {
		t.Errorf("job = %+v, want a succeeded dry run of plan %s", j, b.plan.Hash())
	}
	b.assertSteps(b.job.ID, workflow.StepDone, string(provision.DryRunOutcome), once)
	summary := b.plan.Summary()
	for i, s := range b.steps(b.job.ID) {
		if s.Detail != summary[i] {
			t.Errorf("step %d detail %q, want the summary line %q", i, s.Detail, summary[i])
		}
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s after a dry run, want approved: nothing was applied", s)
	}
	want := []string{"connection.create", "connection.submit", "connection.approve", "provisioning.dry_run"}
	if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, want) {
		t.Errorf("audit = %v, want %v", acts, want)
	}
	b.verifyAudit()
}

var errCrash = errors.New("simulated crash")

// A worker dies after step k (for every k); another resumes the job once
// the lease has expired.
func TestWorkerResumesAfterACrash(t *testing.T) {
	probe := newBed(t)
	for crash := range len(probe.names) {
		t.Run(fmt.Sprintf("after step %d", crash), func(t *testing.T) {
			b := newBed(t)
			cluster := &fakeCluster{}
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
			if j := b.jobNow(b.job.ID); j.State != workflow.JobRunning || j.LeaseOwner != "dying" {
				t.Fatalf("job after the crash = %+v, want still running under the dead worker", j)
			}

			next := b.worker("next", cluster)
			b.clock.Add(59 * time.Second)
			b.idle(next, "while the lease holds")
			b.clock.Add(time.Second)
			b.runOnce(next)

			j := b.jobNow(b.job.ID)
			if j.State != workflow.JobSucceeded || j.Attempts != 2 {
				t.Errorf("job = %+v, want succeeded at attempt 2", j)
			}
			b.assertSteps(b.job.ID, workflow.StepDone, "created", func(seq int) int {
				if seq <= crash {
					return 2
				}
				return 1
			})
			for i, name := range b.names {
				want := 1
				if i <= crash {
					want = 2
				}
				if n := cluster.count(name); n != want {
					t.Errorf("%s applied %d times, want %d", name, n, want)
				}
			}
			if s := b.state(b.conn.ID); s != workflow.StateActive {
				t.Errorf("connection %s, want active", s)
			}
			if acts := actions(b.audit(b.conn.ID)); !slices.Equal(acts, provisioned) {
				t.Errorf("audit = %v, want %v (one start, one success)", acts, provisioned)
			}
			b.verifyAudit()
		})
	}
}

// A job that kills its worker every time is failed once it has used its
// attempts, instead of being resumed forever.
func TestWorkerGivesUpOnACrashLoop(t *testing.T) {
	b := newBed(t)
	for i := range 3 {
		w := b.worker(fmt.Sprintf("w%d", i), &fakeCluster{})
		w.MaxAttempts = 2
		w.AfterStep = func(int) error { return errCrash }
		did, err := w.RunOnce(t.Context())
		if i < 2 && !errors.Is(err, errCrash) || i == 2 && err != nil || !did {
			t.Fatalf("claim %d: RunOnce = %v, %v", i+1, did, err)
		}
		b.clock.Add(2 * time.Minute)
	}
	j := b.jobNow(b.job.ID)
	if j.State != workflow.JobFailed || !strings.Contains(j.LastError, "gave up after 2 attempts") {
		t.Errorf("job = %+v, want failed after 2 attempts", j)
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s, want approved", s)
	}
}

// A worker whose lease was taken over stops at its next write.
func TestWorkerStopsWhenItsLeaseIsTaken(t *testing.T) {
	b := newBed(t)
	slow := b.worker("slow", &fakeCluster{})
	slow.AfterStep = func(seq int) error {
		if seq == 1 {
			// While the slow worker is stuck, its lease expires and
			// another worker takes the job.
			if _, ok, err := b.db.ClaimJob(t.Context(), "other", b.clock.Now().Add(2*time.Minute), time.Minute); !ok || err != nil {
				t.Fatalf("takeover claim = %v, %v", ok, err)
			}
		}
		return nil
	}
	did, err := slow.RunOnce(t.Context())
	if !did || !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("RunOnce = %v, %v; want ErrLeaseLost", did, err)
	}
	ss := b.steps(b.job.ID)
	if ss[1].State != workflow.StepDone || ss[2].State != workflow.StepPending || ss[2].Attempts != 0 {
		t.Errorf("steps = %+v; the slow worker must not start step 2", ss[:3])
	}
	if j := b.jobNow(b.job.ID); j.LeaseOwner != "other" || j.State != workflow.JobRunning {
		t.Errorf("job = %+v, want running under the other worker", j)
	}
}

func TestWorkerRefusesAPlanOtherThanThePinnedOne(t *testing.T) {
	b := newBed(t)
	if err := b.db.ExecForTest(t.Context(), fmt.Sprintf(`UPDATE jobs SET plan_hash = 'abc' WHERE id = %d`, b.job.ID)); err != nil {
		t.Fatal(err)
	}
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	if j := b.jobNow(b.job.ID); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "not the one approved") {
		t.Errorf("job = %+v, want failed: plan differs from the pinned one", j)
	}
	if len(cluster.calls) != 0 {
		t.Errorf("applied %v with a plan nobody approved", cluster.calls)
	}
}

func TestWorkerPlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		state workflow.JobState
	}{
		{"permanent: cannot be planned", provision.Permanent(errors.New("the plan cannot be built")), workflow.JobFailed},
		{"transient: the version could not be read", errors.New("database is locked"), workflow.JobQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			w := b.worker("w1", &fakeCluster{})
			w.Plans = func(context.Context, int64, int) (provision.Plan, error) { return provision.Plan{}, tc.err }
			b.runOnce(w)
			if j := b.jobNow(b.job.ID); j.State != tc.state || !strings.Contains(j.LastError, tc.err.Error()) {
				t.Errorf("job = %+v, want %s with %q", j, tc.state, tc.err)
			}
			if s := b.state(b.conn.ID); s != workflow.StateApproved {
				t.Errorf("connection %s, want approved: nothing started", s)
			}
		})
	}
}

func TestWorkerFailsAJobOfARevokedConnection(t *testing.T) {
	b := newBed(t)
	// A revocation cancels every other job of the connection in its own
	// transaction, so a provisioning job never meets a revoking connection
	// through the store. The worker's lifecycle check is the second line:
	// the row is moved behind the store's back here.
	if err := b.db.ExecForTest(t.Context(), fmt.Sprintf(`UPDATE connections SET state = 'revoking' WHERE id = %d`, b.conn.ID)); err != nil {
		t.Fatal(err)
	}
	cluster := &fakeCluster{}
	b.runOnce(b.worker("w1", cluster))
	if j := b.jobNow(b.job.ID); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "being revoked cannot be provisioned") {
		t.Errorf("job = %+v, want failed with the lifecycle's refusal", j)
	}
	if s := b.state(b.conn.ID); s != workflow.StateRevoking {
		t.Errorf("connection %s, want still revoking", s)
	}
	if len(cluster.calls) != 0 {
		t.Errorf("applied %v for a revoked connection", cluster.calls)
	}
}

// Run drains the queue, and a cancelled context stops it between steps
// with the job handed back, due at once.
func TestWorkerRun(t *testing.T) {
	b := newBed(t)
	conn2, job2 := b.approve("blue")
	n := len(b.names)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stopAt := n + 3 // during the third step (seq 2) of the second job
	cluster := &fakeCluster{onApply: func(calls int) {
		if calls == stopAt {
			cancel()
		}
	}}
	w := b.worker("w1", cluster)
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Errorf("first connection %s, want active", s)
	}
	j := b.jobNow(job2.ID)
	if j.State != workflow.JobQueued || !j.NotBefore.Equal(b.clock.Now()) || !strings.Contains(j.LastError, "worker stopped") {
		t.Errorf("second job = %+v, want handed back, due now", j)
	}
	ss := b.steps(job2.ID)
	if ss[2].State != workflow.StepDone || ss[3].State != workflow.StepPending {
		t.Errorf("second job's steps: %+v; want the running step finished and the next not started", ss[:4])
	}
	if s := b.state(conn2.ID); s != workflow.StateProvisioning {
		t.Errorf("second connection %s, want provisioning", s)
	}

	b.runOnce(b.worker("w2", cluster))
	if s := b.state(conn2.ID); s != workflow.StateActive {
		t.Errorf("second connection %s after resuming, want active", s)
	}
	b.verifyAudit()
}

func TestWorkerNeedsItsParts(t *testing.T) {
	b := newBed(t)
	for name, w := range map[string]*provision.Worker{
		"no owner":   {Store: b.db, Plans: b.worker("", nil).Plans, Apply: &fakeCluster{}},
		"no applier": {Store: b.db, Plans: b.worker("", nil).Plans, Owner: "w"},
		"no plans":   {Store: b.db, Apply: &fakeCluster{}, Owner: "w"},
	} {
		if _, err := w.RunOnce(t.Context()); err == nil {
			t.Errorf("%s: RunOnce succeeded", name)
		}
	}
	if j := b.jobNow(b.job.ID); j.State != workflow.JobQueued || j.Attempts != 0 {
		t.Errorf("job = %+v, want untouched", j)
	}
}

// ApplierSteps applies one object through the real Applier (on a dynamic
// client double): its outcome, detail and error classification are
// Apply's.
func TestApplierSteps(t *testing.T) {
	b := newBed(t)
	o := b.plan.Objects[1]
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(o.Obj.GroupVersionKind(), meta.RESTScopeNamespace)
	dyn := &fakeDynamic{live: map[string]string{}}
	steps := provision.ApplierSteps{Applier: &provision.Applier{Client: dyn, Mapper: m}}

	for _, want := range []provision.Outcome{provision.Created, provision.Unchanged} {
		out, detail, err := steps.ApplyObject(t.Context(), o)
		if err != nil || out != want || detail != "resourceVersion 5" {
			t.Errorf("ApplyObject = %s, %q, %v; want %s, resourceVersion 5", out, detail, err, want)
		}
	}
	dyn.fail = apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, o.Name, errors.New("denied"))
	out, _, err := steps.ApplyObject(t.Context(), o)
	if out != provision.Failed || !provision.IsPermanent(err) || !strings.Contains(err.Error(), o.Ref()) {
		t.Errorf("ApplyObject = %s, %v; want a permanent failure naming %s", out, err, o.Ref())
	}
}

type fakeDynamic struct {
	live map[string]string
	fail error
}

func (f *fakeDynamic) Resource(schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{f: f}
}

// fakeResource implements Get, Apply and Namespace; the embedded nil
// interface panics on anything else.
type fakeResource struct {
	dynamic.NamespaceableResourceInterface
	f  *fakeDynamic
	ns string
}

func (r *fakeResource) Namespace(ns string) dynamic.ResourceInterface {
	return &fakeResource{f: r.f, ns: ns}
}

func (r *fakeResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	rv, ok := r.f.live[r.ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, name)
	}
	u := &unstructured.Unstructured{}
	u.SetResourceVersion(rv)
	return u, nil
}

func (r *fakeResource) Apply(_ context.Context, name string, obj *unstructured.Unstructured, _ metav1.ApplyOptions, _ ...string) (*unstructured.Unstructured, error) {
	if r.f.fail != nil {
		return nil, r.f.fail
	}
	r.f.live[r.ns+"/"+name] = "5"
	out := obj.DeepCopy()
	out.SetResourceVersion("5")
	return out, nil
}

// roomyCluster gives the example contracts' cluster room for every test's
// approvals (an approval checks capacity inside its transaction), as an
// observed inventory.
func roomyCluster(tb testing.TB, db *store.DB) {
	tb.Helper()
	var rows []string
	for _, t := range []string{"ml.p5.48xlarge", "ml.g5.8xlarge", "ml.g6.8xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.c6i.large", "ml.m5.xlarge"} {
		rows = append(rows, "('shared-hp', '"+t+"', 1000, 'test', '2025-03-01T09:00:00.000000000Z')")
	}
	if err := db.ExecForTest(tb.Context(), `INSERT INTO cluster_observed (cluster_name, instance_type, capacity, basis, observed_at) VALUES `+strings.Join(rows, ", ")); err != nil {
		tb.Fatal(err)
	}
}
