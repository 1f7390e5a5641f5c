package provision

import (
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestExplainAdmission: the words the pages show are the rules the policy
// enforces, with the values of the team's parameters: the clause of each
// refusal message, the queue, the Kueue names of the allowed classes, the
// approved kinds, the guaranteed instance types; and what the mode does.
func TestExplainAdmission(t *testing.T) {
	c := workflow.ExampleContract()
	s := DefaultClusterSettings()
	p, err := BuildPlan(7, 1, c.Hash(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	params := admissionOf(t, p).params.Data
	mode, rules := ExplainAdmission(c, s, LocalQueueName(p.Namespace))
	if !strings.Contains(mode, "warn mode") {
		t.Errorf("default mode: %q", mode)
	}
	if len(rules) != 5 {
		t.Fatalf("%d rules, want the policy's 5", len(rules))
	}
	all := ""
	for _, r := range rules {
		all += r.Clause + " " + r.Says + "\n"
	}
	for _, want := range []string{clauseQueue, clausePriority, clauseKinds, clauseBarePods, clauseInstanceTypes,
		KueueQueueLabel + ": " + params["queue"], "ml.p5.48xlarge"} {
		if !strings.Contains(all, want) {
			t.Errorf("the rules do not say %q:\n%s", want, all)
		}
	}
	for _, pc := range strings.Split(params["priorityClasses"], ",") {
		if !strings.Contains(rules[1].Says, pc) {
			t.Errorf("allowed class %s (the parameters') missing: %s", pc, rules[1].Says)
		}
	}
	for _, k := range ApprovedKinds(c.WorkloadTypes) {
		if !strings.Contains(all, k.Kind) {
			t.Errorf("approved kind %s missing:\n%s", k.Kind, all)
		}
	}
	s.AdmissionMode = AdmissionDeny
	if mode, _ := ExplainAdmission(c, s, "q"); !strings.Contains(mode, "refuses") {
		t.Errorf("deny mode: %q", mode)
	}
	s.AdmissionMode = AdmissionAudit
	if mode, _ := ExplainAdmission(c, s, "q"); !strings.Contains(mode, "audit log") {
		t.Errorf("audit mode: %q", mode)
	}
}
