package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov/awstest"
	"github.com/hyperpod-governance/portal/internal/store"
)

func TestSchedulerPageDryRun(t *testing.T) {
	h := newHarness(t, false, withAWS)
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin/scheduler")
	for _, want := range []string{`data-testid="scheduler-classes"`, "<td>inference</td><td>1000</td><td>100</td>", "<td>training</td><td>500</td><td>50</td>",
		"<td>experiment</td><td>100</td><td>10</td>", "Record a dry run", "arn:aws:sagemaker:us-east-1:111122223333:cluster/a1b2c3d4e5f6"} {
		if !strings.Contains(body, want) {
			t.Errorf("scheduler page lacks %q", want)
		}
	}
	resp, body := h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Dry run recorded") || !strings.Contains(body, `data-testid="scheduler-history"`) {
		t.Errorf("dry run = %d", resp.StatusCode)
	}
	evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "scheduler.dry_run"}, 0, 10)
	if len(evs) != 1 || !strings.Contains(evs[0].Reason, "inference=100") || evs[0].Actor != "admin@example.test" {
		t.Errorf("audit = %+v", evs)
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
}

func TestSchedulerReconcilesAgainstTheEndpoint(t *testing.T) {
	sm := awstest.NewSageMaker(t)
	sm.Set(func(f *awstest.SageMaker) { f.SettleAfter = 1 })
	client := sagemaker.NewFromConfig(awstest.Config(3), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(sm.URL()) })
	h := newHarness(t, false, withAWS, func(o *Options) {
		o.Scheduler = client
		o.AWSPoll = awsprov.PollConfig{Interval: 10 * time.Millisecond, Timeout: 10 * time.Second}
	})
	admin := h.signIn("admin")
	resp, body := h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Scheduler config created (version 1)") {
		t.Fatalf("first reconcile = %d\n%s", resp.StatusCode, body)
	}
	resp, body = h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Scheduler config unchanged") {
		t.Errorf("second reconcile = %d", resp.StatusCode)
	}
	if n := sm.Count("created:scheduler-config"); n != 1 {
		t.Errorf("%d scheduler configs created, want 1", n)
	}
	sm.Deny("ListClusterSchedulerConfigs", -1)
	resp, body = h.postAs(admin, "/admin/scheduler", url.Values{})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "not authorized to perform") {
		t.Errorf("denied reconcile = %d", resp.StatusCode)
	}
	if evs, _ := h.db.AuditEvents(context.Background(), store.AuditFilter{Action: "scheduler.reconcile_failed"}, 0, 10); len(evs) != 1 {
		t.Errorf("failed reconciles audited: %d", len(evs))
	}
}
