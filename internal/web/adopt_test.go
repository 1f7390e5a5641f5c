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

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/awstest"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// A compute quota made in the console for the team stops provisioning for
// good; an admin adopts it on the connection page (a refused ARN keeps the
// input and says why), which tags it, is audited, and queues provisioning
// again.
func TestAdoptAConsoleQuota(t *testing.T) {
	ctx := context.Background()
	c := workflow.ExampleContract()
	f := awstest.NewSageMaker(t)
	sm := sagemaker.NewFromConfig(awstest.Config(1), func(o *sagemaker.Options) { o.BaseEndpoint = aws.String(f.URL()) })
	console := f.AddForeignQuota("console-red", c.ClusterARN, c.Team, nil)
	blue := f.AddForeignQuota("console-blue", c.ClusterARN, "blue", nil)

	h := newHarness(t, false, withAWS, func(o *Options) { o.Quotas = provision.AWSQuotaAdopter{API: sm} })
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	form := formValues(formFromContract(c))
	form.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", form)
	h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}})
	v, _ := h.db.Version(ctx, 1, 1)
	if resp, _ := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve = %d", resp.StatusCode)
	}
	// The job's compute quota step meets the console's quota and stops.
	in, err := awsprov.ComputeQuotaFor(c, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, stepErr := awsprov.EnsureComputeQuota(ctx, sm, &in, awsprov.PollConfig{})
	if !awsprov.IsPermanent(stepErr) {
		t.Fatalf("ensure = %v, want a permanent error", stepErr)
	}
	now := time.Now()
	job, ok, err := h.db.ClaimJob(ctx, "w1", now, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := h.db.FailJob(ctx, job.ID, "w1", "provision: step SageMaker compute quota red-quota: "+stepErr.Error(), now); err != nil {
		t.Fatal(err)
	}

	_, body := h.get(admin.c, "/connections/1")
	if !strings.Contains(body, `data-testid="adopt-quota"`) || !strings.Contains(body, `value="`+console.ARN+`"`) {
		t.Fatalf("the admin is not offered to adopt %s", console.ARN)
	}
	if _, ob := h.get(owner.c, "/connections/1"); strings.Contains(ob, `data-testid="adopt-quota"`) {
		t.Error("the owner is offered the adoption")
	}
	if resp, _ := h.postAs(owner, "/connections/1/adopt-quota", url.Values{"quota_arn": {console.ARN}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("owner adopt = %d, want 403", resp.StatusCode)
	}

	// Another team's quota is refused, on the form, with the input kept.
	resp, body := h.postAs(admin, "/connections/1/adopt-quota", url.Values{"quota_arn": {blue.ARN}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-quota_arn"`) ||
		!strings.Contains(body, "allocates to another team") || !strings.Contains(body, `value="`+blue.ARN+`"`) {
		t.Errorf("adopting another team's quota = %d, want 422 with the reason and the input kept", resp.StatusCode)
	}
	if f.Count("AddTags") != 0 {
		t.Fatal("a refused adoption tagged a quota")
	}

	if resp, _ := h.postAs(admin, "/connections/1/adopt-quota", url.Values{"quota_arn": {console.ARN}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("adopt = %d", resp.StatusCode)
	}
	tags := map[string]string{}
	for _, tg := range f.Quota(console.ID).Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags[awsprov.TagConnection] != "1" {
		t.Errorf("adopted quota tags %v, want %s=1", tags, awsprov.TagConnection)
	}
	evs, err := h.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "connection", ObjectID: 1}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, e := range evs {
		audited = audited || e.Action == auditAdoptQuota && strings.Contains(e.Reason, console.ARN) && e.Actor == "admin@example.test"
	}
	if !audited {
		t.Error("the adoption is not in the audit trail")
	}
	if jobs, _ := h.db.JobsFor(ctx, 1); len(jobs) != 2 || jobs[0].State != workflow.JobQueued {
		t.Errorf("jobs after adoption = %+v, want provisioning queued again", jobs)
	}
	// The next run finds the quota as this connection's and updates it.
	in, _ = awsprov.ComputeQuotaFor(c, "", 1)
	res, err := awsprov.EnsureComputeQuota(ctx, sm, &in, awsprov.PollConfig{Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil || res.ID != console.ID || res.Action != awsprov.Updated {
		t.Errorf("the run after adoption = %+v, %v; want %s updated", res, err, console.ID)
	}
}

// In HyperPod-managed mode (the default settings) the form refuses a
// namespace beside hyperpod-ns-<team>, says why, and keeps the input; with
// portal-managed ClusterQueues it is accepted.
func TestFormRefusesANamespaceBesideHyperPods(t *testing.T) {
	c := workflow.ExampleContract()
	c.Namespaces = []string{"hyperpod-ns-red", "red-batch"}
	form := formValues(formFromContract(c))
	form.Set("intent", "submit")
	h := newHarness(t, false)
	resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "HyperPod task governance creates and owns the team namespace hyperpod-ns-red") ||
		!strings.Contains(body, "red-batch") {
		t.Errorf("a second namespace in HyperPod-managed mode = %d, want 422 with the reason and the input kept", resp.StatusCode)
	}
	portal := newHarness(t, false, func(o *Options) { o.Cluster.ClusterQueueManagedByPortal = true })
	if resp, _ := portal.postAs(portal.signIn("owner.red"), "/teams/red/connections", form); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a second namespace with portal-managed ClusterQueues = %d, want saved", resp.StatusCode)
	}
}
