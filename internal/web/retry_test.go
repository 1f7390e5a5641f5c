package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestRetryAFailedProvisioningJob(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	v, _ := h.db.Version(ctx, 1, 1)
	if resp, _ := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve = %d", resp.StatusCode)
	}
	// A worker takes the job and it fails for good.
	now := time.Now()
	job, ok, err := h.db.ClaimJob(ctx, "w1", now, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := h.db.FailJob(ctx, job.ID, "w1", "Invalid: metadata.name: bad", now); err != nil {
		t.Fatal(err)
	}
	_, body := h.get(admin.c, "/connections/1")
	if !strings.Contains(body, `data-testid="job-error"`) || !strings.Contains(body, `data-testid="retry-job"`) {
		t.Fatal("the admin sees no error or no retry on a failed job")
	}
	if _, ob := h.get(owner.c, "/connections/1"); strings.Contains(ob, `data-testid="retry-job"`) {
		t.Error("the owner gets a retry button")
	}
	if resp, _ := h.postAs(owner, "/connections/1/retry", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner retry = %d, want 403", resp.StatusCode)
	}
	if resp, _ := h.postAs(h.signIn("owner.blue"), "/connections/1/retry", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("outsider retry = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.postAs(admin, "/connections/1/retry", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin retry = %d", resp.StatusCode)
	}
	jobs, _ := h.db.JobsFor(ctx, 1)
	if len(jobs) != 2 || jobs[0].State != workflow.JobQueued || jobs[0].Kind != workflow.JobProvision {
		t.Errorf("jobs after retry = %+v", jobs)
	}
	// The retry applies the plan the approval named, never an unpinned one.
	if plan := h.planHash(1, 1); len(jobs) == 2 && (jobs[0].PlanHash != plan || jobs[1].PlanHash != plan) {
		t.Errorf("retry job pinned to %q, the approval's to %q; want both %q", jobs[0].PlanHash, jobs[1].PlanHash, plan)
	}
	if resp, _ := h.postAs(admin, "/connections/1/retry", nil); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second retry while one is queued = %d, want 409", resp.StatusCode)
	}
}
