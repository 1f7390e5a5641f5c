package provision

import (
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestPriorityClassKueueNames: the Kueue class of a configured priority
// class is name+"-priority" (HyperPod task governance's naming), in both
// ClusterQueue modes: the portal creates its WorkloadPriorityClasses under
// that name, and the plan's warning names the label value a job would use.
func TestPriorityClassKueueNames(t *testing.T) {
	s := DefaultClusterSettings()
	if got := s.KueuePriorityClass("training"); got != "training-priority" {
		t.Errorf("KueuePriorityClass(training) = %q, want training-priority", got)
	}
	c := borrowingContract() // names experiment (defined) and research (not)
	p, err := BuildPlan(1, 1, c.Hash(), c, managedSettings())
	if err != nil {
		t.Fatal(err)
	}
	var wpcs []string
	for _, o := range p.Objects {
		if o.Kind == "WorkloadPriorityClass" {
			wpcs = append(wpcs, o.Name)
		}
	}
	want := []string{"inference-priority", "interactive-priority", "training-priority", "fine-tuning-priority", "experiment-priority"}
	if strings.Join(wpcs, " ") != strings.Join(want, " ") {
		t.Errorf("WorkloadPriorityClasses = %v, want %v", wpcs, want)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "kueue.x-k8s.io/priority-class: research-priority") {
		t.Errorf("warnings do not name the Kueue class of the undefined class research: %q", p.Warnings)
	}
}

// TestPriorityClassNameCap: a configured class is a scheduler-config class
// name: a DNS label of at most workflow.MaxPriorityClassLen characters.
func TestPriorityClassNameCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("a", workflow.MaxPriorityClassLen), true},
		{strings.Repeat("a", workflow.MaxPriorityClassLen+1), false},
		{"high.priority", false},
		{"High", false},
	} {
		s := DefaultClusterSettings()
		s.PriorityClasses = []PriorityClass{{Name: tc.name, Value: 1}}
		err := s.Check()
		if (err == nil) != tc.ok {
			t.Errorf("Check with class %q = %v, want ok=%t", tc.name, err, tc.ok)
		}
	}
}
