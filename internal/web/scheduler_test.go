package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
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

// schedulerWorker is the provisioning worker as cmd/portal builds it for
// scheduler jobs: api nil runs them dry. Its clock moves an hour per read,
// so that a retry is due at the next claim without waiting.
func (h *harness) schedulerWorker(api awsprov.SchedulerAPI) *provision.Worker {
	var mu sync.Mutex
	now := time.Now()
	return &provision.Worker{
		Store: h.db,
		Plans: func(context.Context, int64, int) (provision.Plan, error) {
			return provision.Plan{}, errors.New("no connection jobs in this test")
		},
		DryRun: true, Owner: "test-worker", MaxAttempts: 3,
		Clock: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(time.Hour)
			return now
		},
		Scheduler: &provision.SchedulerJobs{Spec: h.srv.opts.Cluster.SchedulerSpec, API: api,
			Poll: awsprov.PollConfig{Interval: 10 * time.Millisecond, Timeout: 10 * time.Second}},
	}
}

// runJobs runs the worker until the queue has nothing due.
func runJobs(t *testing.T, w *provision.Worker) int {
	t.Helper()
	n := 0
	for {
		did, err := w.RunOnce(t.Context())
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if !did {
			return n
		}
		n++
	}
}

func (h *harness) schedulerJobs() []workflow.Job {
	h.t.Helper()
	js, err := h.db.ClusterJobs(context.Background(), workflow.JobScheduler, 100)
	if err != nil {
		h.t.Fatal(err)
	}
	return js
}

func (h *harness) auditCount(action string) int {
	h.t.Helper()
	evs, err := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: action}, 0, 100)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(evs)
}

// Without real AWS calls the POST queues a job that records the calls it
// would make, and the page follows it and says it is a dry run.
func TestSchedulerPageDryRun(t *testing.T) {
	h := newHarness(t, false, withAWS)
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin/scheduler")
	for _, want := range []string{`data-testid="scheduler-classes"`, "<td>inference</td><td>1000</td><td>100</td>", "<td>training</td><td>500</td><td>50</td>",
		"<td>experiment</td><td>100</td><td>10</td>", "Queue a dry run", "the job records the calls it would make and makes none",
		"arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6"} {
		if !strings.Contains(body, want) {
			t.Errorf("scheduler page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-testid="scheduler-job"`) {
		t.Error("the page shows a job before any was queued")
	}
	resp, err := noRedirect(admin.c).PostForm(h.base+"/admin/scheduler", url.Values{"_csrf": {admin.token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/scheduler" {
		t.Fatalf("POST = %d to %q, want 303 to the page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if js := h.schedulerJobs(); len(js) != 1 || js[0].State != workflow.JobQueued {
		t.Fatalf("scheduler jobs after the POST = %+v, want one queued", js)
	}
	_, body = h.get(admin.c, "/admin/scheduler")
	for _, want := range []string{`data-testid="scheduler-job" data-refresh-url="/admin/scheduler" data-job-state="queued"`, "Waiting for the provisioning worker", "scheduler.enqueue"} {
		if !strings.Contains(body, want) {
			t.Errorf("page with a queued job lacks %q", want)
		}
	}
	runJobs(t, h.schedulerWorker(nil))
	_, body = h.get(admin.c, "/admin/scheduler")
	for _, want := range []string{`data-job-state="succeeded"`, `data-testid="dry-run"`, "<td>dry-run</td>", "would call ListClusterSchedulerConfigs", "scheduler.dry_run"} {
		if !strings.Contains(body, want) {
			t.Errorf("page after the dry run lacks %q", want)
		}
	}
	if strings.Contains(body, `data-refresh-url="/admin/scheduler"`) {
		t.Error("a finished job still asks the page to refresh")
	}
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "scheduler.dry_run"}, 0, 10)
	if len(evs) != 1 || !strings.Contains(evs[0].Reason, "inference=100") || evs[0].Actor != "provisioner" {
		t.Errorf("audit = %+v", evs)
	}
	evs, _ = h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "scheduler.enqueue"}, 0, 10)
	if len(evs) != 1 || evs[0].Actor != "admin@example.test" {
		t.Errorf("enqueue audit = %+v", evs)
	}
	for _, name := range []string{"owner.red", "reviewer", "finance"} {
		s := h.signIn(name)
		if resp, _ := h.get(s.c, "/admin/scheduler"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s GET = %d, want 403", name, resp.StatusCode)
		}
		if resp, _ := h.postAs(s, "/admin/scheduler", url.Values{}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s POST = %d, want 403", name, resp.StatusCode)
		}
	}
	if js := h.schedulerJobs(); len(js) != 1 {
		t.Errorf("%d scheduler jobs after refused POSTs, want 1", len(js))
	}
}

func TestSchedulerPageWithoutAWS(t *testing.T) {
	h := newHarness(t, false)
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin/scheduler")
	if !strings.Contains(body, `data-testid="scheduler-unavailable"`) || !strings.Contains(body, "--aws-settings") {
		t.Error("without AWS settings the page must say why there is nothing to reconcile")
	}
	if resp, _ := h.postAs(admin, "/admin/scheduler", url.Values{}); resp.StatusCode != http.StatusConflict {
		t.Errorf("reconcile without AWS = %d, want 409", resp.StatusCode)
	}
	if js := h.schedulerJobs(); len(js) != 0 {
		t.Errorf("a job was queued without AWS settings: %+v", js)
	}
}

// The POST only queues: the endpoint sees no call until the worker runs
// the job; then the page shows what it did. A second POST while the job is
// open queues nothing and says why.
func TestSchedulerReconcileIsAJob(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	sm.Set(func(f *awstest.SageMaker) { f.SettleAfter = 1 })
	client := sagemaker.NewFromConfig(awstest.Config(3), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	h := newHarness(t, false, withAWS, func(o *Options) { o.SchedulerCalls = true })
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin/scheduler")
	if !strings.Contains(body, "Queue a reconcile") || strings.Contains(body, "makes none") {
		t.Error("with real AWS calls the page must offer a reconcile, not a dry run")
	}
	resp, _ := h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/scheduler" {
		t.Fatalf("POST = %d to %q, want 303 to the page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body = h.get(admin.c, "/admin/scheduler"); !strings.Contains(body, `data-job-state="queued"`) {
		t.Error("the page does not show the queued job")
	}
	if n := len(sm.Log()); n != 0 {
		t.Errorf("the POST made %d AWS calls while the request waited: %q", n, sm.Log())
	}
	resp, body = h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already queued or running: nothing new was queued") {
		t.Errorf("second POST while open = %d, want 409 with a message", resp.StatusCode)
	}
	if js := h.schedulerJobs(); len(js) != 1 || h.auditCount("scheduler.enqueue") != 1 {
		t.Errorf("%d jobs, %d enqueue events after the refused POST; want 1 and 1", len(js), h.auditCount("scheduler.enqueue"))
	}

	w := h.schedulerWorker(client)
	runJobs(t, w)
	_, body = h.get(admin.c, "/admin/scheduler")
	for _, want := range []string{`data-job-state="succeeded"`, "<td>created</td>", "scheduler.succeeded", "a1b2c3d4e5f6-portal-scheduler"} {
		if !strings.Contains(body, want) {
			t.Errorf("page after the job lacks %q", want)
		}
	}
	if strings.Contains(body, `data-testid="dry-run"`) {
		t.Error("a real reconcile is shown as a dry run")
	}
	if n := sm.Count("created:scheduler-config"); n != 1 {
		t.Errorf("%d scheduler configs created, want 1", n)
	}
	h.postAs(admin, "/admin/scheduler", url.Values{})
	runJobs(t, w)
	if _, body = h.get(admin.c, "/admin/scheduler"); !strings.Contains(body, "<td>unchanged</td>") {
		t.Error("a second reconcile of the same settings is not shown as unchanged")
	}
	if n := sm.Count("created:scheduler-config"); n != 1 {
		t.Errorf("%d scheduler configs created after two reconciles, want 1", n)
	}
}

// A failing endpoint: the job is retried with backoff, then fails, with
// the error on the page and a scheduler.failed audit event.
func TestSchedulerJobRetriesThenFails(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	client := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	h := newHarness(t, false, withAWS, func(o *Options) { o.SchedulerCalls = true })
	admin := h.signIn("admin")
	h.postAs(admin, "/admin/scheduler", url.Values{})
	sm.Fail(1000) // HTTP 500 on every call: transient
	w := h.schedulerWorker(client)
	if did, err := w.RunOnce(t.Context()); !did || err != nil {
		t.Fatalf("first attempt: %v, %v", did, err)
	}
	j := h.schedulerJobs()[0]
	if j.State != workflow.JobQueued || j.Attempts != 1 || j.LastError == "" {
		t.Errorf("after a transient failure the job is %+v, want queued for a retry", j)
	}
	_, body := h.get(admin.c, "/admin/scheduler")
	if !strings.Contains(body, "next try") || !strings.Contains(body, `data-testid="job-error"`) {
		t.Error("the page does not show the retry and the error")
	}
	if runJobs(t, w) != 2 {
		t.Error("want two more attempts (MaxAttempts 3)")
	}
	j = h.schedulerJobs()[0]
	if j.State != workflow.JobFailed || j.Attempts != 3 || !strings.Contains(j.LastError, "gave up after 3 attempts") {
		t.Errorf("job = %+v, want failed after 3 attempts", j)
	}
	if n := h.auditCount("scheduler.failed"); n != 1 {
		t.Errorf("%d scheduler.failed events, want 1", n)
	}
	_, body = h.get(admin.c, "/admin/scheduler")
	if !strings.Contains(body, `data-job-state="failed"`) || !strings.Contains(body, "gave up after 3 attempts") || !strings.Contains(body, "<td>failed</td>") {
		t.Error("the page does not show the failed job with its error")
	}
	// Finished: the admin may queue another.
	if resp, _ := h.postAs(admin, "/admin/scheduler", url.Values{}); resp.StatusCode != http.StatusSeeOther || len(h.schedulerJobs()) != 2 {
		t.Errorf("POST after a failure = %d with %d jobs, want a second job", resp.StatusCode, len(h.schedulerJobs()))
	}
}
