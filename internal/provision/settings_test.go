package provision

import "testing"

// The members' submit snippets submit training jobs: they label the
// contract's training class, never the cluster's serving class when the
// contract allows another (it would preempt the team's serving work).
func TestTrainingClass(t *testing.T) {
	var s ClusterSettings // the default classes
	custom := ClusterSettings{PriorityClasses: []PriorityClass{{"serve", 900}, {"batch", 300}, {"bulk", 100}}}
	for _, tc := range []struct {
		s       ClusterSettings
		allowed []string
		want    string
	}{
		{s, []string{"inference", "training"}, "training"},
		{s, []string{"training", "inference"}, "training"},
		{s, []string{"inference", "fine-tuning"}, "fine-tuning"},
		{s, []string{"inference"}, "inference"},
		{s, nil, "training"},
		{s, []string{"inference", "experiment", "interactive"}, "experiment"}, // not above training: interactive would preempt notebooks
		{s, []string{"inference", "interactive", "fine-tuning"}, "fine-tuning"},
		{custom, []string{"serve", "bulk", "batch"}, "batch"}, // the cluster's own serving class
		{custom, []string{"serve"}, "serve"},
		{ClusterSettings{PriorityClasses: []PriorityClass{}}, []string{"b", "a"}, "b"}, // no classes defined: no panic
	} {
		if got := tc.s.TrainingClass(tc.allowed); got != tc.want {
			t.Errorf("TrainingClass(%v) = %q, want %q", tc.allowed, got, tc.want)
		}
	}
}
