package provision_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// schedulerBed is a migrated database, the settings' cluster and a worker
// that runs scheduler jobs against api (nil: dry run) on a manual clock.
type schedulerBed struct {
	t     *testing.T
	db    *store.DB
	clock *clock
	w     *provision.Worker
	arn   string
}

func newSchedulerBed(t *testing.T, api awsprov.SchedulerAPI) *schedulerBed {
	t.Helper()
	db, err := store.OpenMigrated(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := provision.DefaultClusterSettings()
	s.AWS = awsprov.DevSettings()
	b := &schedulerBed{t: t, db: db, clock: &clock{t: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}, arn: s.AWS.ClusterARN}
	b.w = &provision.Worker{
		Store: db,
		Plans: func(context.Context, int64, int) (provision.Plan, error) {
			t.Fatal("a scheduler job built a plan")
			return provision.Plan{}, nil
		},
		DryRun: true, Owner: "w", Clock: b.clock.Now, Lease: time.Minute,
		Backoff: 10 * time.Second, MaxBackoff: 15 * time.Second, MaxAttempts: 3,
		Scheduler: &provision.SchedulerJobs{Spec: s.SchedulerSpec, API: api, Poll: awsprov.PollConfig{Interval: time.Millisecond}},
	}
	return b
}

func (b *schedulerBed) enqueue(cluster string) workflow.Job {
	b.t.Helper()
	j, err := b.db.EnqueueScheduler(b.t.Context(), cluster, workflow.Actor{Email: "admin@example.test"}, "", b.clock.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	return j
}

func (b *schedulerBed) job(id int64) workflow.Job {
	b.t.Helper()
	j, err := b.db.Job(b.t.Context(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return j
}

func (b *schedulerBed) lastClusterEvent() store.AuditEvent {
	b.t.Helper()
	evs, err := b.db.AuditEvents(b.t.Context(), store.AuditFilter{ObjectType: "cluster"}, 0, 1)
	if err != nil || len(evs) != 1 {
		b.t.Fatalf("AuditEvents = %v, %v", evs, err)
	}
	return evs[0]
}

func TestSchedulerJobAppliesAndRecords(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	client := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	b := newSchedulerBed(t, client)
	j := b.enqueue(b.arn)
	if len(sm.Log()) != 0 {
		t.Fatal("queuing the job called AWS")
	}
	// A throttled first attempt is retried after the worker's backoff.
	sm.Throttle(1)
	b.runOnceSched()
	got := b.job(j.ID)
	if got.State != workflow.JobQueued || !got.NotBefore.Equal(b.clock.Now().Add(10*time.Second)) || !strings.Contains(got.LastError, "Throttling") {
		t.Errorf("after a throttled attempt: %+v, want queued 10s later", got)
	}
	if did, _ := b.w.RunOnce(t.Context()); did {
		t.Error("the retry ran before its backoff")
	}
	b.clock.Add(10 * time.Second)
	b.runOnceSched()
	got = b.job(j.ID)
	if got.State != workflow.JobSucceeded || got.Attempts != 2 || got.DryRun {
		t.Errorf("job = %+v, want succeeded on attempt 2", got)
	}
	steps, _ := b.db.JobSteps(t.Context(), j.ID)
	if len(steps) != 1 || steps[0].Outcome != "created" || steps[0].State != workflow.StepDone || steps[0].Attempts != 2 ||
		!strings.HasPrefix(steps[0].Name, "scheduler config a1b2c3d4e5f6-portal-scheduler on ") {
		t.Errorf("steps = %+v", steps)
	}
	if ev := b.lastClusterEvent(); ev.Action != "scheduler.succeeded" || !strings.Contains(ev.Reason, "created: config") {
		t.Errorf("last cluster event = %+v", ev)
	}
	if sm.Count("created:scheduler-config") != 1 {
		t.Error("no scheduler config was created")
	}
}

// Errors no retry can fix fail the job at once: AWS refusing access, a job
// queued for a cluster the settings no longer name, a worker that does
// not run scheduler jobs.
func TestSchedulerJobPermanentFailures(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	client := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	b := newSchedulerBed(t, client)

	sm.Deny("ListClusterSchedulerConfigs", -1)
	j := b.enqueue(b.arn)
	b.runOnceSched()
	if got := b.job(j.ID); got.State != workflow.JobFailed || got.Attempts != 1 || !strings.Contains(got.LastError, "AccessDenied") {
		t.Errorf("denied job = %+v, want failed after one attempt", got)
	}
	if ev := b.lastClusterEvent(); ev.Action != "scheduler.failed" || ev.Actor != "provisioner" {
		t.Errorf("last cluster event = %+v", ev)
	}

	other := "arn:aws:sagemaker:us-east-1:111122223333:cluster/ffffffffffff"
	j = b.enqueue(other)
	calls := len(sm.Log())
	b.runOnceSched()
	if got := b.job(j.ID); got.State != workflow.JobFailed || !strings.Contains(got.LastError, "the settings now name") {
		t.Errorf("job for another cluster = %+v", got)
	}
	if len(sm.Log()) != calls {
		t.Error("a job for another cluster called AWS")
	}

	b.w.Scheduler = nil
	j = b.enqueue(b.arn)
	b.runOnceSched()
	if got := b.job(j.ID); got.State != workflow.JobFailed || !strings.Contains(got.LastError, "not run by this portal") {
		t.Errorf("job without scheduler support = %+v", got)
	}
}

func TestSchedulerJobDryRunCallsNothing(t *testing.T) {
	b := newSchedulerBed(t, nil)
	j := b.enqueue(b.arn)
	b.runOnceSched()
	got := b.job(j.ID)
	if got.State != workflow.JobSucceeded || !got.DryRun {
		t.Errorf("dry-run job = %+v", got)
	}
	steps, _ := b.db.JobSteps(t.Context(), j.ID)
	if len(steps) != 1 || steps[0].Outcome != string(provision.DryRunOutcome) || !strings.Contains(steps[0].Detail, "would call ListClusterSchedulerConfigs") {
		t.Errorf("steps = %+v", steps)
	}
	if ev := b.lastClusterEvent(); ev.Action != "scheduler.dry_run" {
		t.Errorf("last cluster event = %+v", ev)
	}
	if js, _ := b.db.ClusterJobs(t.Context(), workflow.JobScheduler, 5); len(js) != 1 {
		t.Errorf("cluster jobs = %+v", js)
	}
}

func (b *schedulerBed) runOnceSched() {
	b.t.Helper()
	did, err := b.w.RunOnce(b.t.Context())
	if err != nil || !did {
		b.t.Fatalf("RunOnce = %v, %v; want a job run", did, err)
	}
}
