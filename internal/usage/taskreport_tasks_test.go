package usage

import (
	"testing"
	"time"
)

// TestTasksOf: a Workload's pods fold into one task from the earliest
// start to the latest end (Running while one still runs), its accelerator
// seconds clipped to the period; a pod without a Workload is its own task;
// the Workload's name and priority class win over the pod's.
func TestTasksOf(t *testing.T) {
	h := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	m := func(n int) time.Time { return h.Add(time.Duration(n) * time.Minute) }
	as := []Alloc{
		{Key: "p1", Task: "wl-1", Team: "red", Accelerators: 8, Start: m(-30), End: m(20), Pod: "train-0", PriorityClass: "low", Status: "Succeeded"},
		{Key: "p2", Task: "wl-1", Team: "red", Accelerators: 8, Start: m(10), Pod: "train-1", PriorityClass: "low", Status: "Running"},
		{Key: "p3", Team: "red", Accelerators: 1, Start: m(5), End: m(15), Pod: "bare", Status: "Failed"},
	}
	got := TasksOf(as, map[string]string{"wl-1": "train"}, map[string]string{"wl-1": "training-priority"}, h, m(60))
	if len(got) != 2 {
		t.Fatalf("tasks = %+v, want 2", got)
	}
	w, bare := got[0], got[1]
	if w.Task != "train" || w.PriorityClass != "training-priority" || !w.Start.Equal(m(-30)) || !w.End.IsZero() || w.Status != "Running" {
		t.Errorf("workload task = %+v", w)
	}
	// p1 from the period's start to m(20): 20 min; p2 from m(10) to the end: 50 min; 8 GPUs each.
	if want := int64(8*20*60 + 8*50*60); w.AccelSeconds != want {
		t.Errorf("workload accelerator-seconds = %d, want %d", w.AccelSeconds, want)
	}
	if bare.Task != "bare" || bare.Status != "Failed" || bare.AccelSeconds != 600 || !bare.End.Equal(m(15)) {
		t.Errorf("bare pod task = %+v", bare)
	}
}
