package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// slurmBed is a bed whose approved connection is a Slurm one.
func slurmBed(t *testing.T, settings provision.ClusterSettings) *bed {
	t.Helper()
	return newBedWith(t, settings, withContract(func(c *workflow.Contract) {
		c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
		c.SlurmScope = workflow.SlurmScope{Account: "red", Partition: "gpu", QoS: "red-gpu"}
	}))
}

// The approval pins a Slurm plan as it pins an EKS one: when the cluster
// settings change the plan after the approval (here the parent account),
// the job fails before running a command.
func TestWorkerRefusesASlurmPlanOtherThanTheApproved(t *testing.T) {
	b := slurmBed(t, provision.DefaultClusterSettings())
	changed := provision.DefaultClusterSettings()
	changed.Slurm.ParentAccount = "elsewhere"
	b.settings = changed
	w := b.worker("w1", &fakeCluster{})
	acct := &emptyAccounting{}
	w.Slurm = acct
	b.runOnce(w)
	if j := b.jobNow(b.job.ID); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "is not the one approved") {
		t.Errorf("job = %+v; want failed: the plan is not the approved one", j)
	}
	if acct.reads+acct.writes != 0 {
		t.Errorf("the accounting was used (%d reads, %d writes) for a plan nobody approved", acct.reads, acct.writes)
	}
}

// Without a Slurm transport a Slurm job fails, saying so, instead of
// pretending.
func TestWorkerWithoutSlurmTransportFailsSlurmJobs(t *testing.T) {
	b := slurmBed(t, provision.DefaultClusterSettings())
	b.runOnce(b.worker("w1", &fakeCluster{}))
	if j := b.jobNow(b.job.ID); j.State != workflow.JobFailed || !strings.Contains(j.LastError, "no Slurm transport") {
		t.Errorf("job = %+v; want failed: no Slurm transport", j)
	}
}

// acceptingAccounting is a Slurm whose accounting is empty until a change
// is made, and then holds the plan (appliedAccounting): the change
// commands are recorded.
type acceptingAccounting struct {
	plan    *appliedAccounting
	changes []string
}

func (a *acceptingAccounting) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name == "sacctmgr" && len(args) >= 3 && args[1] == "show" {
		if len(a.changes) > 0 {
			return a.plan.Run(ctx, name, args...)
		}
		format := args[len(args)-1]
		return []byte(strings.ReplaceAll(strings.TrimPrefix(format, "format="), ",", "|") + "\n"), nil
	}
	a.changes = append(a.changes, name+" "+strings.Join(args, " "))
	return nil, nil
}

// A portal for a HyperPod Slurm cluster has no Kubernetes cluster: its
// worker runs dry (no --kubeconfig) but has a Slurm transport, and its
// Slurm connections are provisioned for real (the commands run, the
// connection becomes active), while an EKS connection's job on the same
// worker is still only recorded (the connection stays approved).
func TestSlurmOnlyWorkerProvisionsSlurmConnections(t *testing.T) {
	b := slurmBed(t, provision.DefaultClusterSettings())
	w := b.worker("w1", nil)
	w.DryRun = true
	acct := &acceptingAccounting{plan: &appliedAccounting{p: *b.plan.Slurm}}
	w.Slurm = acct
	b.runOnce(w)
	if j := b.jobNow(b.job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("job = %+v, want succeeded", j)
	}
	if s := b.state(b.conn.ID); s != workflow.StateActive {
		t.Errorf("connection %s, want active: the Slurm steps ran", s)
	}
	if all := strings.Join(acct.changes, "\n"); !strings.Contains(all, "add qos red-gpu") || !strings.Contains(all, "add account red") {
		t.Errorf("commands run:\n%s\nwant the QoS and the account added", all)
	}

	eks := newBed(t)
	we := eks.worker("w1", nil)
	we.DryRun = true
	we.Slurm = &acceptingAccounting{plan: &appliedAccounting{p: *b.plan.Slurm}}
	eks.runOnce(we)
	if j := eks.jobNow(eks.job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("EKS job = %+v, want succeeded (dry run)", j)
	}
	if s := eks.state(eks.conn.ID); s != workflow.StateApproved {
		t.Errorf("EKS connection %s after a dry run, want approved", s)
	}
}

// In dry-run mode without a Slurm transport (make run), a Slurm job is
// recorded, nothing is called, and the connection stays approved.
func TestDryRunWorkerRecordsSlurmJobs(t *testing.T) {
	b := slurmBed(t, provision.DefaultClusterSettings())
	w := b.worker("w1", nil)
	w.DryRun = true
	b.runOnce(w)
	if j := b.jobNow(b.job.ID); j.State != workflow.JobSucceeded {
		t.Fatalf("job = %+v, want succeeded (dry run)", j)
	}
	if s := b.state(b.conn.ID); s != workflow.StateApproved {
		t.Errorf("connection %s after a dry run, want approved", s)
	}
}
