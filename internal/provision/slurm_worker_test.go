package provision_test

import (
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// slurmBed is a bed whose approved connection is a Slurm one.
func slurmBed(t *testing.T, settings provision.ClusterSettings) *bed {
	t.Helper()
	editContract = func(c *workflow.Contract) {
		c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
		c.SlurmScope = workflow.SlurmScope{Account: "red", Partition: "gpu", QoS: "red-gpu"}
	}
	defer func() { editContract = nil }()
	return newBedWith(t, settings)
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
