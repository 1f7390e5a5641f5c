package provision_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// stepFunc is a StepApplier running f for every object.
type stepFunc func(ctx context.Context, o provision.Object) (provision.Outcome, string, error)

func (f stepFunc) ApplyObject(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
	return f(ctx, o)
}

// beat makes the worker's heartbeat beat once; a heartbeat that does not
// take it fails the test (after a failsafe wait, not a timing).
func beat(t *testing.T, ticks chan<- time.Time) {
	t.Helper()
	select {
	case ticks <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's heartbeat did not beat")
	}
}

// The promise of the replicas (docs/replicas.md): a dead holder's job
// resumes within 15 s. The lease and the poll are what that rests on, and
// the heartbeat beats at least three times a lease.
func TestJobLeaseFitsTheResumePromise(t *testing.T) {
	if provision.JobLease+provision.DefaultPollInterval > 15*time.Second {
		t.Errorf("lease %s + poll %s: a dead holder's job would wait more than 15 s", provision.JobLease, provision.DefaultPollInterval)
	}
	if 3*provision.JobHeartbeat > provision.JobLease {
		t.Errorf("heartbeat %s: fewer than three beats in a lease of %s", provision.JobHeartbeat, provision.JobLease)
	}
}

// A worker with the default lease that dies mid-job (kill -9: no hand-back)
// leaves a job that another worker claims JobLease later, not before.
func TestDeadHoldersJobResumesAfterTheShortLease(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	dying := b.worker("dying", cluster)
	dying.Lease = 0 // the default
	dying.AfterStep = func(int) error { return errCrash }
	if did, err := dying.RunOnce(t.Context()); !did || !errors.Is(err, errCrash) {
		t.Fatalf("RunOnce = %v, %v; want the crash", did, err)
	}
	next := b.worker("next", cluster)
	next.Lease = 0
	b.clock.Add(provision.JobLease - time.Second)
	b.idle(next, "while the dead holder's lease holds")
	b.clock.Add(time.Second)
	b.runOnce(next)
	if j := b.jobNow(b.job.ID); j.State != workflow.JobSucceeded || j.Attempts != 2 {
		t.Errorf("job = %+v, want succeeded at attempt 2", j)
	}
}

// A step far longer than the lease (a slow AWS wait) keeps its job: the
// heartbeat renews the lease, so no other worker can claim it, and the job
// completes under its first holder.
func TestHeartbeatKeepsASlowStepsJob(t *testing.T) {
	b := newBed(t)
	ticks := make(chan time.Time)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	w := b.worker("slow", stepFunc(func(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
		if first {
			first = false
			close(entered)
			<-release
		}
		return provision.Created, "", nil
	}))
	w.Lease, w.HeartbeatTicks = provision.JobLease, ticks
	done := make(chan error, 1)
	go func() { _, err := w.RunOnce(context.Background()); done <- err }()
	<-entered
	for range 5 { // 15 s of a step, with a beat every JobHeartbeat
		b.clock.Add(provision.JobHeartbeat)
		beat(t, ticks)
	}
	beat(t, ticks) // received only once the previous beat's renewal is written
	if _, ok, err := b.db.ClaimJob(t.Context(), "other", b.clock.Now(), provision.JobLease); ok || err != nil {
		t.Errorf("another worker claimed the job of a live slow step: %v, %v", ok, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("RunOnce = %v", err)
	}
	if j := b.jobNow(b.job.ID); j.State != workflow.JobSucceeded || j.Attempts != 1 {
		t.Errorf("job = %+v, want succeeded at its first attempt", j)
	}
}

// A heartbeat that finds the lease taken over stops the step in flight
// (its context is cancelled with ErrLeaseLost) and the worker writes
// nothing more: the job stays with the worker that took it.
func TestHeartbeatStopsTheStepWhenTheLeaseIsLost(t *testing.T) {
	b := newBed(t)
	ticks := make(chan time.Time)
	entered := make(chan struct{})
	cause := make(chan error, 1)
	w := b.worker("slow", stepFunc(func(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
		close(entered)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return provision.Failed, "", ctx.Err()
		case <-time.After(time.Minute): // a failsafe, not a timing
			cause <- errors.New("the step was never stopped")
			return provision.Failed, "", errors.New("not stopped")
		}
	}))
	w.Lease, w.HeartbeatTicks = provision.JobLease, ticks
	done := make(chan error, 1)
	go func() { _, err := w.RunOnce(context.Background()); done <- err }()
	<-entered
	b.clock.Add(provision.JobLease + time.Second)
	if _, ok, err := b.db.ClaimJob(t.Context(), "thief", b.clock.Now(), provision.JobLease); !ok || err != nil {
		t.Fatalf("takeover claim = %v, %v", ok, err)
	}
	beat(t, ticks)
	if c := <-cause; !errors.Is(c, store.ErrLeaseLost) {
		t.Errorf("the step stopped with cause %v, want ErrLeaseLost", c)
	}
	if err := <-done; !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RunOnce = %v, want ErrLeaseLost", err)
	}
	if j := b.jobNow(b.job.ID); j.LeaseOwner != "thief" || j.State != workflow.JobRunning {
		t.Errorf("job = %+v, want running under the thief", j)
	}
	if ss := b.steps(b.job.ID); ss[0].State == workflow.StepFailed {
		t.Errorf("step 0 = %+v: the worker that lost the lease wrote its failure", ss[0])
	}
}

// batchOf is a SnapshotApplier whose snapshot of any plans is steps.
type batchOf struct{ provision.StepApplier }

func (b batchOf) ForPlans(context.Context, []provision.Plan) (provision.StepApplier, error) {
	return b.StepApplier, nil
}

// slowFirst is a fakeCluster whose first apply waits for release.
type slowFirst struct {
	*fakeCluster
	once             *sync.Once
	entered, release chan struct{}
}

func (s slowFirst) ApplyObject(ctx context.Context, o provision.Object) (provision.Outcome, string, error) {
	s.once.Do(func() { close(s.entered); <-s.release })
	return s.fakeCluster.ApplyObject(ctx, o)
}

// A batch of re-apply jobs keeps the lease of every job it claimed while
// one job's step is slow, the others' included (they wait their turn): the
// heartbeat renews them all, so no other worker claims any of them.
func TestHeartbeatKeepsEveryJobOfABatch(t *testing.T) {
	b := newBed(t)
	cluster := &fakeCluster{}
	b.provisioned(cluster)
	blue, _ := b.approve("blue")
	b.runOnce(b.worker("provisioner", cluster))
	var ids []int64
	for _, id := range []int64{b.conn.ID, blue.ID} {
		j, err := b.db.EnqueueReapply(t.Context(), id, workflow.Actor{Email: "admin@example.test"}, "check", b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	ticks := make(chan time.Time)
	slow := slowFirst{fakeCluster: cluster, once: &sync.Once{}, entered: make(chan struct{}), release: make(chan struct{})}
	w := b.worker("batch", batchOf{slow})
	w.Lease, w.HeartbeatTicks = provision.JobLease, ticks
	done := make(chan error, 1)
	go func() { _, err := w.RunOnce(context.Background()); done <- err }()
	<-slow.entered
	for range 5 { // 15 s of a step, with a beat every JobHeartbeat
		b.clock.Add(provision.JobHeartbeat)
		beat(t, ticks)
	}
	beat(t, ticks) // received only once the previous beat's renewals are written
	if j, ok, err := b.db.ClaimJob(t.Context(), "other", b.clock.Now(), provision.JobLease); ok || err != nil {
		t.Errorf("another worker claimed job %d of a live batch: %v, %v", j.ID, ok, err)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatalf("RunOnce = %v", err)
	}
	for _, id := range ids {
		if j := b.jobNow(id); j.State != workflow.JobSucceeded || j.Attempts != 1 {
			t.Errorf("job %d = %s at attempt %d, want succeeded at its first", id, j.State, j.Attempts)
		}
	}
}
