package workflow

import (
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
