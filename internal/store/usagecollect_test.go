package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func TestUsageRecordsReplaceAndTasks(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	a := usage.Alloc{Key: "uid-1", Task: "wl-1", Pod: "train-0", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
		Accelerators: 8, CPUMilli: 1000, MemoryMiB: 512, Start: h0, Status: "Running", PriorityClass: "training"}
	b := usage.Alloc{Key: "uid-2", Pod: "solo", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
		Accelerators: 2, Start: h0.Add(30 * time.Minute), End: h0.Add(40 * time.Minute), Status: "Succeeded"}
	w := usage.Workload{Key: "wl-1", Name: "job-a", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
		PriorityClass: "training-wpc", Created: h0.Add(-5 * time.Minute),
		Pending:     []usage.Span{{From: h0.Add(-5 * time.Minute), To: h0}},
		Admissions:  []usage.Admission{{At: h0, WaitSeconds: 300}},
		Preemptions: nil}
	n := usage.NodeSpan{Node: "n1", InstanceType: "ml.p5.48xlarge", Accelerators: 8, Schedulable: true, From: h0}
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Allocs: []usage.Alloc{a, b}, Workloads: []usage.Workload{w}, Nodes: []usage.NodeSpan{n}}); err != nil {
		t.Fatal(err)
	}
	open, err := db.OpenUsageRecords(ctx, "hp")
	if err != nil || len(open.Allocs) != 1 || open.Allocs[0] != a || len(open.Nodes) != 1 || open.Nodes[0] != n {
		t.Fatalf("open = %+v, %v", open, err)
	}
	// The pod finished: recorded again by UID, it is replaced, not added.
	a.End, a.Status = h0.Add(90*time.Minute), "Succeeded"
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Allocs: []usage.Alloc{a}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageRecordsIn(ctx, "hp", h0.Add(time.Hour), h0.Add(2*time.Hour))
	if err != nil || len(got.Allocs) != 1 || got.Allocs[0] != a || len(got.Workloads) != 1 || !reflect.DeepEqual(got.Workloads[0], w) {
		t.Fatalf("records in 11h = %+v, %v", got, err)
	}
	if got, _ := db.UsageRecordsIn(ctx, "other", h0, h0.Add(2*time.Hour)); len(got.Allocs)+len(got.Workloads)+len(got.Nodes) != 0 {
		t.Errorf("another cluster's records = %+v", got)
	}
	// The task report over 10:00-11:00: job-a (its Workload's name and
	// priority class) held 8 GPUs the whole hour; solo 2 x 600 s.
	tasks, err := db.UsageTasks(ctx, store.TaskFilter{Cluster: "hp", Team: "red", From: h0, To: h0.Add(time.Hour)})
	want := []usage.Task{
		{Task: "job-a", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", PriorityClass: "training-wpc",
			Status: "Succeeded", Start: h0, End: h0.Add(90 * time.Minute), AccelSeconds: 8 * 3600},
		{Task: "solo", Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge",
			Status: "Succeeded", Start: b.Start, End: b.End, AccelSeconds: 2 * 600},
	}
	if err != nil || !reflect.DeepEqual(tasks, want) {
		t.Errorf("tasks = %+v, %v\nwant %+v", tasks, err, want)
	}
	if tasks, _ := db.UsageTasks(ctx, store.TaskFilter{Cluster: "hp", Team: "blue", From: h0, To: h0.Add(time.Hour)}); len(tasks) != 0 {
		t.Errorf("blue sees %+v", tasks)
	}
}

func TestClaimCollectorAndReplaceUsage(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	last, err := db.ClaimCollector(ctx, "hp", "one", h0, h0.Add(-time.Minute))
	if err != nil || !last.IsZero() {
		t.Fatalf("first claim = %v, %v", last, err)
	}
	row := func(team string, at time.Time, g int64) usage.Hour {
		return usage.Hour{Team: team, Namespace: "ns-" + team, InstanceType: "p5", Start: at, GuaranteedAccelSeconds: g, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1}
	}
	demo := row("demo", h0, 5)
	demo.Source = usage.SourceDemo
	if err := db.PutUsageHours(ctx, []usage.Hour{row("red", h0, 100), row("blue", h0, 50), row("red", h0.Add(-time.Hour), 7), demo}); err != nil {
		t.Fatal(err)
	}
	// Recomputing 10:00-10:30 finds only red: blue's stale row of that
	// hour goes, red's is replaced, the hour before and demo rows stay.
	if err := db.ReplaceUsage(ctx, "hp", h0, h0.Add(30*time.Minute), []usage.Hour{row("red", h0, 60)}, nil, "one"); err != nil {
		t.Fatal(err)
	}
	got, _ := db.UsageHours(ctx, store.UsageFilter{From: h0.Add(-time.Hour), To: h0.Add(time.Hour)})
	if len(got) != 3 || got[0].GuaranteedAccelSeconds != 7 || got[1].Team != "demo" || got[2].Team != "red" || got[2].GuaranteedAccelSeconds != 60 {
		t.Errorf("after replace = %+v", got)
	}
	// A second instance is refused while the first's heartbeat (10:30) is
	// fresh, and takes over once it is stale, learning where it stopped.
	if _, err := db.ClaimCollector(ctx, "hp", "two", h0.Add(31*time.Minute), h0.Add(29*time.Minute)); !errors.Is(err, store.ErrCollectorLost) {
		t.Fatalf("second claim while fresh = %v", err)
	}
	last, err = db.ClaimCollector(ctx, "hp", "two", h0.Add(2*time.Hour), h0.Add(time.Hour))
	if err != nil || !last.Equal(h0.Add(30*time.Minute)) {
		t.Fatalf("takeover = %v, %v", last, err)
	}
	// The first instance, still writing, is told it lost the cluster.
	if err := db.ReplaceUsage(ctx, "hp", h0, h0.Add(time.Hour), nil, nil, "one"); !errors.Is(err, store.ErrCollectorLost) {
		t.Errorf("stale writer = %v", err)
	}
	if got, _ := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: h0, To: h0.Add(time.Hour)}); len(got) != 1 {
		t.Errorf("a refused replace deleted rows: %+v", got)
	}
	// Another collector's cluster (the Slurm reader's, issue 36) replaces
	// its own rows only, and the first cluster's replace leaves them.
	if _, err := db.ClaimCollector(ctx, "slurm/hp", "s", h0, h0.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	slurmRow := row("red", h0, 30)
	slurmRow.Namespace = "slurm:red"
	if err := db.ReplaceUsage(ctx, "slurm/hp", h0, h0.Add(40*time.Minute), []usage.Hour{slurmRow}, nil, "s"); err != nil {
		t.Fatal(err)
	}
	if err := db.ReplaceUsage(ctx, "hp", h0, h0.Add(2*time.Hour), []usage.Hour{row("blue", h0, 9)}, nil, "two"); err != nil {
		t.Fatal(err)
	}
	got, _ = db.UsageHours(ctx, store.UsageFilter{From: h0, To: h0.Add(time.Hour)})
	if len(got) != 3 || got[0].Team != "blue" || got[1].Team != "demo" || got[2].Namespace != "slurm:red" || got[2].GuaranteedAccelSeconds != 30 {
		t.Errorf("after the Slurm reader's and the EKS collector's replaces = %+v", got)
	}
	if err := db.ReplaceUsage(ctx, "slurm/hp", h0, h0.Add(41*time.Minute), nil, nil, "s"); err != nil {
		t.Fatal(err)
	}
	got, _ = db.UsageHours(ctx, store.UsageFilter{From: h0, To: h0.Add(time.Hour)})
	if len(got) != 2 || got[0].Team != "blue" || got[1].Team != "demo" {
		t.Errorf("after the Slurm reader's empty replace = %+v", got)
	}
}

// CommittedVersions lists the approved version of each connection in a
// committed state, and nothing of a connection only submitted (the Slurm
// usage reader maps accounts to teams from it).
func TestCommittedVersions(t *testing.T) {
	f := newFixture(t, 1)
	approved := f.submitted(contract("red", "ns-red", ""))
	f.approve(approved.ID, f.admins[0], 1)
	f.submitted(contract("blue", "ns-blue", ""))
	vs, err := f.db.CommittedVersions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].ConnectionID != approved.ID || vs[0].Version != 1 || vs[0].Contract.Team != "red" ||
		vs[0].Contract.Namespaces[0] != "ns-red" {
		t.Errorf("CommittedVersions = %+v; want red's approved version 1 only", vs)
	}
	for _, ev := range []workflow.Event{workflow.EventStartProvisioning, workflow.EventProvisioningSucceeded} {
		f.transition(approved.ID, ev, f.admins[0], "")
	}
	if vs, _ := f.db.CommittedVersions(t.Context()); len(vs) != 1 || vs[0].ConnectionID != approved.ID {
		t.Errorf("active: CommittedVersions = %+v", vs)
	}
}

// TestUsageRecordsInManyStatements: a flush larger than one multi-row
// upsert (1,234 pods, 1,100 Workloads, 1,001 node spans: three statements
// of each kind) is written whole, and a key named twice in one call keeps
// its last record, as when each record was upserted in turn (PostgreSQL
// refuses one statement that updates a row twice).
func TestUsageRecordsInManyStatements(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	var r store.UsageRecords
	for i := range 1234 {
		r.Allocs = append(r.Allocs, usage.Alloc{Key: fmt.Sprintf("uid-%d", i), Task: fmt.Sprintf("wl-%d", i%1100), Pod: fmt.Sprintf("p-%d", i),
			Team: "red", Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Accelerators: int64(1 + i%8), Start: h0, Status: "Running"})
	}
	for i := range 1100 {
		r.Workloads = append(r.Workloads, usage.Workload{Key: fmt.Sprintf("wl-%d", i), Name: fmt.Sprintf("job-%d", i), Team: "red",
			Namespace: "hyperpod-ns-red", InstanceType: "ml.p5.48xlarge", Created: h0.Add(-time.Minute),
			Admissions: []usage.Admission{{At: h0, WaitSeconds: 60}}})
	}
	for i := range 1001 {
		r.Nodes = append(r.Nodes, usage.NodeSpan{Node: fmt.Sprintf("n%d", i), InstanceType: "ml.p5.48xlarge", Accelerators: 8, Schedulable: true, From: h0})
	}
	// The same pod, Workload and node span again a few records later, so
	// in the same statement: they finished, and were cordoned.
	lastPod := r.Allocs[7]
	lastPod.End, lastPod.Status = h0.Add(30*time.Minute), "Succeeded"
	lastWl := r.Workloads[700]
	lastWl.Finished = h0.Add(30 * time.Minute)
	lastNode := r.Nodes[999]
	lastNode.Schedulable, lastNode.To = false, h0.Add(20*time.Minute)
	want := slices.Clone(r.Allocs)
	want[7] = lastPod
	r.Allocs = slices.Insert(r.Allocs, 9, lastPod)
	r.Workloads = slices.Insert(r.Workloads, 703, lastWl)
	r.Nodes = slices.Insert(r.Nodes, 1000, lastNode)
	if err := db.PutUsageRecords(ctx, "hp", r); err != nil {
		t.Fatal(err)
	}
	got, err := db.UsageRecordsIn(ctx, "hp", h0, h0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Allocs) != 1234 || len(got.Workloads) != 1100 || len(got.Nodes) != 1001 {
		t.Fatalf("stored %d pods, %d Workloads, %d node spans; want 1234, 1100, 1001", len(got.Allocs), len(got.Workloads), len(got.Nodes))
	}
	pods := map[string]usage.Alloc{}
	for _, a := range got.Allocs {
		pods[a.Key] = a
	}
	for _, w := range want {
		if pods[w.Key] != w {
			t.Errorf("pod %s = %+v, want %+v", w.Key, pods[w.Key], w)
		}
	}
	for _, w := range got.Workloads {
		if w.Key == lastWl.Key && !w.Finished.Equal(lastWl.Finished) {
			t.Errorf("Workload %s finished %v, want the last record's %v", w.Key, w.Finished, lastWl.Finished)
		}
	}
	for _, n := range got.Nodes {
		if n.Node == lastNode.Node && n != lastNode {
			t.Errorf("node span %s = %+v, want the last record's %+v", n.Node, n, lastNode)
		}
	}
}
