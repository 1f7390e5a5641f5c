package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestEvidenceBundleOfASlurmConnection: a Slurm connection's bundle holds
// its sacctmgr steps as applied and the team's usage from the Slurm usage
// reader's rows (namespace slurm:<account>), summed by month and instance
// type like an EKS team's, and verifies offline.
func TestEvidenceBundleOfASlurmConnection(t *testing.T) {
	f := newFixture(t, 1)
	ctx := t.Context()
	c := contract("red", "hyperpod-ns-red", "")
	c.Orchestrator, c.EKSClusterName, c.Namespaces = workflow.OrchestratorSlurm, "", nil
	c.SlurmScope = workflow.SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "red-gpu"}
	conn := f.submitted(c)
	conn, _ = f.approve(conn.ID, f.admins[0], 1)
	jobs := f.jobs(conn.ID)
	if len(jobs) != 1 {
		t.Fatalf("approval queued %d jobs", len(jobs))
	}
	if j := f.claim("provisioner"); j.ID != jobs[0].ID {
		t.Fatalf("claimed job %d, want %d", j.ID, jobs[0].ID)
	}
	steps := []string{"sacctmgr: add qos red-gpu", "sacctmgr: add account red-acct"}
	f.run(jobs[0].ID, "provisioner", steps, false, 0)
	if err := f.db.CompleteJob(ctx, jobs[0].ID, "provisioner", f.tick()); err != nil {
		t.Fatal(err)
	}
	h := f.now.Truncate(time.Hour)
	if err := f.db.PutUsageHours(ctx, []usage.Hour{
		{Team: "red", Namespace: usage.SlurmNamespace("red-acct"), InstanceType: "ml.p5.48xlarge", Start: h, GuaranteedAccelSeconds: 3 * 3600, BorrowedAccelSeconds: 600},
		{Team: "red", Namespace: usage.SlurmNamespace("red-acct"), InstanceType: "ml.p5.48xlarge", Start: h.Add(time.Hour), GuaranteedAccelSeconds: 3600},
		{Team: "blue", Namespace: usage.SlurmNamespace("blue-acct"), InstanceType: "ml.p5.48xlarge", Start: h, GuaranteedAccelSeconds: 7200},
	}); err != nil {
		t.Fatal(err)
	}
	f.now = h.Add(2*time.Hour + time.Minute) // both of red's hours are over at the export
	b, data := f.evidenceBundle(conn.ID)
	if rep := evidence.Verify(data); !rep.OK() {
		t.Fatalf("the bundle of a Slurm connection does not verify: %v", rep.Failures)
	}
	if len(b.Jobs) != 1 || len(b.Jobs[0].Steps) != 2 || b.Jobs[0].Steps[1].Name != steps[1] {
		t.Errorf("jobs %+v; want the sacctmgr steps", b.Jobs)
	}
	// Oracle: red's rows above summed by hand, over whatever months they
	// fall in; blue's not counted.
	var g, br int64
	hours := 0
	for _, m := range b.Usage.Months {
		if m.InstanceType != "ml.p5.48xlarge" {
			t.Errorf("month %+v: another instance type", m)
		}
		g, br, hours = g+m.GuaranteedAccelSeconds, br+m.BorrowedAccelSeconds, hours+m.HoursCollected
	}
	if g != 4*3600 || br != 600 || hours != 2 {
		t.Errorf("usage %+v: want red's Slurm rows only (14400 s guaranteed, 600 borrowed, 2 hours)", b.Usage.Months)
	}
	if len(b.Versions) != 1 || !strings.Contains(string(b.Versions[0].Contract), `"red-acct"`) {
		t.Errorf("versions %+v", b.Versions)
	}
}
