package workflow

import (
	"strings"
	"testing"
	"time"
)

func TestExampleContractForAnotherTeamIsValidAndItsOwn(t *testing.T) {
	red := ExampleContract()
	blue := ExampleContractFor("blue")
	if errs := blue.Validate(ValidationEnv{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); len(errs) > 0 {
		t.Fatalf("blue's example is invalid: %v", errs)
	}
	if blue.Team != "blue" || blue.Namespaces[0] != "hyperpod-ns-blue" {
		t.Errorf("blue's example = %s %v", blue.Team, blue.Namespaces)
	}
	for _, r := range []string{red.ProjectRoleARN, red.AccessRoleARN, red.WorkloadRoleARN} {
		if r == blue.ProjectRoleARN || r == blue.AccessRoleARN || r == blue.WorkloadRoleARN {
			t.Errorf("blue's example shares red's role %s", r)
		}
	}
	if ExampleContractFor("red").Hash() != red.Hash() {
		t.Error("red's example changed")
	}
}

func TestClaimConflicts(t *testing.T) {
	c := ExampleContract()
	env := ValidationEnv{
		NamespaceTaken: func(ns string) bool { return ns == "hyperpod-ns-red" },
		RoleTaken:      func(r string) bool { return r == c.AccessRoleARN },
	}
	got := c.ClaimConflicts(env)
	want := []string{"namespace hyperpod-ns-red is already held by another connection", "role " + c.AccessRoleARN + " is already named by another connection"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("conflicts = %q, want %q", got, want)
	}
	if got := c.ClaimConflicts(ValidationEnv{}); got != nil {
		t.Errorf("without checks: %q", got)
	}
}

// TestSlurmClaims: a Slurm contract's account and QoS are claims on its
// cluster, like an EKS contract's namespaces: one another connection holds
// is a conflict for the approving admin and an error on the field; the
// partition is the cluster's (shared), and an EKS contract claims none.
func TestSlurmClaims(t *testing.T) {
	c := slurmContract()
	c.SlurmScope = SlurmScope{Account: "red-acct", Partition: "gpu", QoS: "red-gpu"}
	var asked []string
	env := ValidationEnv{SlurmTaken: func(cluster, what, name string) bool {
		asked = append(asked, cluster+" "+what+" "+name)
		return what == "account" || name == "red-gpu"
	}}
	got := c.ClaimConflicts(env)
	if len(got) != 2 || !strings.Contains(got[0], "Slurm account red-acct on cluster "+c.ClusterName) || !strings.Contains(got[1], "Slurm QoS red-gpu") {
		t.Errorf("conflicts = %q", got)
	}
	want := []string{c.ClusterName + " account red-acct", c.ClusterName + " qos red-gpu"}
	if strings.Join(asked, "|") != strings.Join(want, "|") {
		t.Errorf("asked %q, want %q (the partition is not a claim)", asked, want)
	}
	var fields []string
	for _, e := range c.Validate(env) {
		if strings.HasPrefix(e.Field, "slurm_scope") {
			fields = append(fields, e.Field)
		}
	}
	if strings.Join(fields, " ") != "slurm_scope.account slurm_scope.qos" {
		t.Errorf("field errors on %q; want the account and the QoS", fields)
	}
	if got := ExampleContract().ClaimConflicts(ValidationEnv{SlurmTaken: func(string, string, string) bool { return true }}); got != nil {
		t.Errorf("an EKS contract claims Slurm names: %q", got)
	}
}
