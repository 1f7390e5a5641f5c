package web

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func slurmContract() workflow.Contract {
	c := workflow.ExampleContract()
	c.Orchestrator = workflow.OrchestratorSlurm
	c.EKSClusterName = ""
	c.Namespaces = nil
	c.SlurmScope = workflow.SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "red-gpu"}
	return c
}

// submitSlurm files and submits c as red's owner, on a cluster with room.
func submitSlurm(t *testing.T, h *harness, c workflow.Contract) {
	t.Helper()
	owner := h.signIn("owner.red")
	if resp, body := h.postAs(owner, "/teams/red/connections", formValues(formFromContract(c))); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create a Slurm draft = %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := h.postAs(owner, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit = %d", resp.StatusCode)
	}
	if err := h.db.SetInventory(t.Context(), "shared-hp", "ml.p5.48xlarge", 8, workflow.Actor{Email: "admin@example.test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// provisionSlurm approves submitted Slurm connection 1 as admin, pinned to
// its plan, and runs its provisioning job through the store; it returns
// the plan.
func provisionSlurm(t *testing.T, h *harness, admin session) provision.Plan {
	t.Helper()
	v, err := h.db.Version(t.Context(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := provision.BuildPlan(1, 1, v.Hash, v.Contract, h.srv.opts.Cluster)
	if err != nil || plan.Slurm == nil {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	if resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash},
		"plan_hash": {plan.Hash()}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approving = %d\n%s", resp.StatusCode, body)
	}
	h.runJob(workflow.JobProvision)
	return plan
}

// A Slurm contract is approved like an EKS one: the page shows the exact
// sacctmgr commands of its plan, and the approval, pinned to the plan's
// hash, queues the provisioning job pinned to it.
func TestSlurmApprovalShowsTheCommandsAndQueuesTheJob(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	submitSlurm(t, h, slurmContract())
	admin := h.signIn("admin")
	_, page := h.get(admin.c, "/connections/1")
	v, err := h.db.Version(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := provision.BuildPlan(1, 1, v.Hash, v.Contract, h.srv.opts.Cluster)
	if err != nil || plan.Slurm == nil {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	for _, cmd := range plan.Slurm.Commands() {
		if !strings.Contains(page, html.EscapeString(cmd.String())) {
			t.Errorf("the admin's page lacks the command %q", cmd)
		}
	}
	// The decide form names the plan the admin sees, as for EKS.
	for _, want := range []string{`data-testid="slurm-commands"`, "sacctmgr -i add qos red-gpu", "Partition=gpu", "SSMSessionRunAs=&lt;os-user&gt;", `data-testid="approve"`,
		`name="plan_hash" value="` + plan.Hash() + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the admin's page lacks %q", want)
		}
	}
	resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {plan.Hash()}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approving a Slurm contract = %d\n%s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateApproved {
		t.Errorf("after the approval: %s", conn.State)
	}
	js, err := h.db.JobsFor(ctx, 1)
	if err != nil || len(js) != 1 || js[0].Kind != workflow.JobProvision || js[0].PlanHash != plan.Hash() {
		t.Errorf("jobs %+v, %v; want one provisioning job pinned to %s", js, err, plan.Hash())
	}
}

// A Slurm contract whose plan cannot be built (the cluster's default QoS)
// is refused with the reason, and nothing is recorded or queued.
func TestSlurmApprovalRefusedWithoutAPlan(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	c := slurmContract()
	c.SlurmScope.QoS = "normal"
	submitSlurm(t, h, c)
	admin := h.signIn("admin")
	_, page := h.get(admin.c, "/connections/1")
	if !strings.Contains(page, `data-testid="slurm-error"`) || !strings.Contains(page, "default QoS") {
		t.Error("the page does not say why there is no Slurm plan")
	}
	v, err := h.db.Version(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := h.postAs(admin, "/connections/1/decide", url.Values{"decision": {"approve"}, "reason": {"ok"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {"x"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Not approved: this version cannot be provisioned") || !strings.Contains(body, "default QoS") {
		t.Fatalf("approving = %d\n%s", resp.StatusCode, body)
	}
	if conn, _ := h.db.Connection(ctx, 1); conn.State != workflow.StateSubmitted {
		t.Errorf("after the refused approval: %s", conn.State)
	}
	if js, err := h.db.JobsFor(ctx, 1); err != nil || len(js) != 0 {
		t.Errorf("the refused approval queued jobs: %+v %v", js, err)
	}
}

// The form says what the portal sets up on Slurm before the owner submits.
func TestContractFormSaysWhatSlurmGets(t *testing.T) {
	h := newHarness(t, false)
	owner := h.signIn("owner.red")
	_, page := h.get(owner.c, "/teams/red/connections/new")
	if !strings.Contains(page, "on Slurm its account, QoS and member associations") {
		t.Error("the orchestrator field's help does not say what a Slurm connection gets")
	}
	if strings.Contains(page, `data-testid="slurm-notice"`) {
		t.Error("a new (EKS or empty) form shows the Slurm notice")
	}
	h.postAs(owner, "/teams/red/connections", formValues(formFromContract(slurmContract())))
	_, page = h.get(owner.c, "/connections/1/edit")
	if !strings.Contains(page, `data-testid="slurm-notice"`) || !strings.Contains(page, "SSMSessionRunAs stays an operator") {
		t.Error("the edit form of a Slurm draft does not say what stays manual")
	}
}

// A hold on a Slurm connection: the hold panel says what it does to the
// team's account (the job limit, not a Kueue queue), and while it is in
// effect the Slurm section lists the hold job's exact commands (the drain
// adds the scancel calls); a release takes them away.
func TestSlurmHoldWording(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	submitSlurm(t, h, slurmContract())
	admin := h.signIn("admin")
	plan := provisionSlurm(t, h, admin)
	if _, err := h.db.ProposeHold(ctx, 1, workflow.SystemActor, "end date passed", h.srv.opts.Now()); err != nil {
		t.Fatal(err)
	}
	_, page := h.get(admin.c, "/connections/1")
	wording := html.EscapeString(provision.SlurmHoldWording(workflow.StopHold, "red-acct"))
	if !strings.Contains(page, `data-testid="hold-explain"`) || !strings.Contains(page, wording) || strings.Contains(page, "stopPolicy") ||
		strings.Contains(page, `data-testid="slurm-hold"`) {
		t.Errorf("proposed: the panel does not say %q, or speaks of a queue, or lists hold commands", wording)
	}
	holdCmd := "sacctmgr -i modify account where name=red-acct cluster=" + plan.Slurm.Cluster + " set GrpJobs=0"
	step := func(s, confirm string) string {
		t.Helper()
		if resp, body := h.postAs(admin, "/connections/1/hold", url.Values{"step": {s}, "reason": {"test"}, "confirm": {confirm}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s = %d\n%s", s, resp.StatusCode, body)
		}
		_, page := h.get(admin.c, "/connections/1")
		return page
	}
	if !strings.Contains(page, "Confirm hold (no new jobs start)") || strings.Contains(page, "no new admissions") {
		t.Error("proposed: the confirm button does not say that no new jobs start")
	}
	page = step("confirm", "")
	// A drain without the team's name typed: the form says what a drain
	// does to a Slurm account, not Kueue's eviction.
	if resp, body := h.postAs(admin, "/connections/1/hold", url.Values{"step": {"drain"}, "reason": {"test"}, "confirm": {""}}); resp.StatusCode == http.StatusSeeOther ||
		!strings.Contains(body, html.EscapeString(workflow.HoldDrainEffect(workflow.OrchestratorSlurm))) || strings.Contains(body, "evicts") {
		t.Errorf("an unconfirmed drain = %d; want the form saying the Slurm account's running jobs are cancelled", resp.StatusCode)
	}
	for _, want := range []string{"Confirm hold and drain (cancel running jobs)", "the running jobs of account red-acct will be cancelled (scancel)"} {
		if !strings.Contains(page, want) {
			t.Errorf("held: the drain step lacks %q", want)
		}
	}
	if strings.Contains(page, "evict") {
		t.Error("held: a Slurm connection's drain speaks of evicting")
	}
	if !strings.Contains(page, `data-testid="slurm-hold-commands"`) || !strings.Contains(page, holdCmd) || strings.Contains(page, "scancel --account") {
		t.Errorf("held: the Slurm section lacks %q, or lists a drain", holdCmd)
	}
	page = step("drain", "red")
	for _, want := range []string{holdCmd, "scancel --account=red-acct --state=RUNNING", "scancel --account=red-acct --state=SUSPENDED",
		html.EscapeString(provision.SlurmHoldWording(workflow.StopHoldAndDrain, "red-acct"))} {
		if !strings.Contains(page, want) {
			t.Errorf("draining: the page lacks %q", want)
		}
	}
	page = step("release", "")
	if strings.Contains(page, `data-testid="slurm-hold"`) || strings.Contains(page, `data-testid="hold"`) {
		t.Error("released: the hold still shows")
	}
}

// A portal for a Slurm cluster runs without a Kubernetes cluster (DryRun)
// but with a Slurm transport: a Slurm connection's plan and revocation
// note say its steps run, not that they are recorded in dry-run mode;
// without a transport they say dry run.
func TestSlurmPagesOnASlurmOnlyPortal(t *testing.T) {
	const dry = "provisioning runs in dry-run mode"
	for _, transport := range []bool{true, false} {
		h := newHarness(t, false, func(o *Options) { o.DryRun, o.SlurmTransport = true, transport })
		submitSlurm(t, h, slurmContract())
		admin := h.signIn("admin")
		_, page := h.get(admin.c, "/connections/1")
		if got := strings.Contains(page, dry); got == transport {
			t.Errorf("Slurm transport %v: the plan says dry run: %v", transport, got)
		}
		provisionSlurm(t, h, admin)
		_, page = h.get(admin.c, "/connections/1")
		if !strings.Contains(page, "removes the team from Slurm&#39;s accounting database") {
			t.Errorf("Slurm transport %v: no Slurm revocation note", transport)
		}
		if got := strings.Contains(page, "No Slurm transport is configured"); got == transport {
			t.Errorf("Slurm transport %v: the revocation note says no transport: %v", transport, got)
		}
	}
}

// A Slurm change that renames the account and the QoS: the admin's plan
// diff lists every sacctmgr command the amendment job runs
// (slurmprov.AmendCommands, from the two versions' plans), the new
// account and QoS created and the old ones deleted.
func TestSlurmAmendmentPlanDiffShowsTheCommands(t *testing.T) {
	h := newHarness(t, false)
	ctx := t.Context()
	owner, admin := h.signIn("owner.red"), h.signIn("admin")
	approvedConnectionOf(t, h, owner, admin, slurmContract())
	h.runJob(workflow.JobProvision)
	c := slurmContract()
	c.SlurmScope.Account, c.SlurmScope.QoS = "red-acct2", "red-gpu2"
	f := formValues(formFromContract(c))
	f.Set("base_version", "1")
	if resp, body := h.postAs(owner, "/connections/1", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the change = %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := h.postAs(owner, "/connections/1/submit", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("submitting the change = %d", resp.StatusCode)
	}
	plans := make([]provision.Plan, 2)
	for i := range plans {
		v, err := h.db.Version(ctx, 1, i+1)
		if err != nil {
			t.Fatal(err)
		}
		if plans[i], err = provision.BuildPlan(1, i+1, v.Hash, v.Contract, h.srv.opts.Cluster); err != nil || plans[i].Slurm == nil {
			t.Fatalf("plan of version %d: %+v, %v", i+1, plans[i], err)
		}
	}
	_, body := h.get(admin.c, "/connections/1")
	diff := section(body, "plan-diff")
	cmds := slurmprov.AmendCommands(*plans[0].Slurm, *plans[1].Slurm)
	if len(cmds) == 0 {
		t.Fatal("the oracle has no command")
	}
	for _, cmd := range cmds {
		if !strings.Contains(diff, html.EscapeString(cmd.String())) {
			t.Errorf("the plan diff lacks %q", cmd)
		}
	}
	for _, want := range []string{"sacctmgr -i delete account where name=red-acct", "sacctmgr -i delete qos where name=red-gpu", ">create<", ">delete<"} {
		if !strings.Contains(diff, want) {
			t.Errorf("the plan diff lacks %q:\n%s", want, diff)
		}
	}
}
