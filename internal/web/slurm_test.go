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

func slurmContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.Orchestrator = workflow.OrchestratorSlurm
	c.EKSClusterName = ""
	c.Namespaces = nil
	c.SlurmScope = workflow.SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "normal"}
	return c
}

// The portal sets up nothing for Slurm, so a Slurm contract is never
// approved (its job could only fail): the page says what the portal does
// not do, shows no Approve button, and a posted approval is refused with
// nothing recorded or queued.
func TestSlurmApprovalIsRefusedWithTheManualSteps(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	owner := h.signIn("owner.red")
	if resp, body := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(slurmContract()))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create a Slurm draft = %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := h.postAs(owner, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit = %d", resp.StatusCode)
	}
	// The cluster has room: capacity is not why it is refused.
	if err := h.db.SetInventory(ctx, "shared-hp", "ml.p5.48xlarge", 8, workflow.Actor{Email: "admin@example.test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	admin := h.signIn("admin")
	_, page := h.get(admin.c, "/connections/1")
	for _, want := range []string{
		`data-testid="slurm"`, "does not set up Slurm connections yet",
		"sacctmgr add account red-acct",
		"sacctmgr add user &lt;os-user&gt; Account=red-acct Partition=gpu QOS=normal",
		"GrpTRES=node=", "SSMSessionRunAs=&lt;os-user&gt;", "Approval is refused",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the admin's page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-testid="approve"`) || strings.Contains(page, "Approval is blocked") {
		t.Error("the page offers an Approve button for a Slurm contract")
	}
	if !strings.Contains(page, `data-testid="request-changes"`) {
		t.Error("the page lost the other decisions")
	}
	v, err := h.db.Version(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Not approved: the portal does not set up Slurm connections yet") {
		t.Fatalf("approving a Slurm contract = %d\n%s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateSubmitted {
		t.Errorf("after the refused approval: %s", conn.State)
	}
	if js, err := h.db.JobsFor(ctx, 1); err != nil || len(js) != 0 {
		t.Errorf("the refused approval queued jobs: %+v %v", js, err)
	}
	// Request changes still works.
	if resp, _ := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"request_changes"}, "reason": {"use EKS"}, "version": {"1"}, "hash": {v.Hash}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("request changes = %d", resp.StatusCode)
	}
}

// The form says so before the owner submits.
func TestContractFormSaysSlurmCannotBeApproved(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	_, page := h.get(owner.c, "/teams/red/connections/new")
	if !strings.Contains(page, "a Slurm request can be filed but not approved") {
		t.Error("the orchestrator field's help does not say that Slurm requests cannot be approved")
	}
	if strings.Contains(page, `data-testid="slurm-notice"`) {
		t.Error("a new (EKS or empty) form shows the Slurm notice")
	}
	// A Slurm draft, opened for editing, carries the notice.
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(slurmContract())))
	_, page = h.get(owner.c, "/connections/1/edit")
	if !strings.Contains(page, `data-testid="slurm-notice"`) || !strings.Contains(page, "an admin will have to request changes or reject it") {
		t.Error("the edit form of a Slurm draft does not say it cannot be approved")
	}
	// So does a form re-rendered with errors.
	f := formValues(formFromContract(slurmContract()))
	f.Set("account_id", "12")
	f.Set("intent", "submit")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="slurm-notice"`) {
		t.Errorf("re-rendered Slurm form = %d, notice shown: %v", resp.StatusCode, strings.Contains(body, `data-testid="slurm-notice"`))
	}
}
