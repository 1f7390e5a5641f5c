package store_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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

// EachTeamUsageIn hands the collector's recompute one team's records at a
// time (usage.Integrator): every team once, in byte order, with exactly
// the records of UsageRecordsIn that are its own. Team
// names whose byte order differs from a locale's ("B" before "a" by bytes,
// after it in ICU's root collation and glibc's en_US) are grouped all the
// same: on PostgreSQL the team columns are given ICU's root collation
// when the server has it, so that a walk that trusted the column's
// collation would split a team or drop records.
func TestEachTeamUsageIn(t *testing.T) {
	ctx := context.Background()
	db, dsn := openDB(t, true)
	if onPostgres() {
		raw, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		var icu int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_collation WHERE collname = 'und-x-icu'`).Scan(&icu); err != nil {
			t.Fatal(err)
		}
		if icu == 0 {
			t.Log("this PostgreSQL has no ICU collations: the team columns keep the database's collation")
		}
		for _, table := range []string{"usage_allocs", "usage_workloads"} {
			if icu == 0 {
				break
			}
			if _, err := raw.ExecContext(ctx, `ALTER TABLE `+table+` ALTER COLUMN team TYPE text COLLATE "und-x-icu"`); err != nil {
				t.Fatal(err)
			}
		}
		if icu > 0 {
			var first string
			if err := raw.QueryRowContext(ctx, `SELECT t FROM (VALUES ('B'), ('a')) v(t) ORDER BY t COLLATE "und-x-icu" LIMIT 1`).Scan(&first); err != nil || first != "a" {
				t.Fatalf("ICU's root collation puts %q first (%v): the test's premise is gone", first, err)
			}
		}
	}
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	teams := []string{"a", "B", "a-c", "ab", "b", "é"} // Workloads only: "b"; pods only: "é"
	var r store.UsageRecords
	for i := range 300 {
		team := teams[i%len(teams)]
		if team == "b" {
			team = "a"
		}
		a := usage.Alloc{Key: fmt.Sprintf("uid-%03d", i), Task: fmt.Sprintf("wl-%d", i%40), Pod: fmt.Sprintf("p-%d", i), Team: team,
			Namespace: "hyperpod-ns-" + team, InstanceType: "ml.p5.48xlarge", Accelerators: int64(1 + i%8),
			Start: h0.Add(time.Duration(i%7) * 10 * time.Minute), Status: "Running"}
		if i%5 == 0 {
			a.End = a.Start.Add(5 * time.Minute)
		}
		if i%11 == 0 { // ended before the window: not the window's
			a.Start, a.End = h0.Add(-3*time.Hour), h0.Add(-2*time.Hour)
		}
		r.Allocs = append(r.Allocs, a)
	}
	for i := range 60 {
		team := teams[i%len(teams)]
		if team == "é" {
			team = "b"
		}
		r.Workloads = append(r.Workloads, usage.Workload{Key: fmt.Sprintf("wl-%02d", i), Name: fmt.Sprintf("job-%d", i), Team: team,
			Namespace: "hyperpod-ns-" + team, InstanceType: "ml.p5.48xlarge", Created: h0.Add(-time.Minute),
			Admissions: []usage.Admission{{At: h0, WaitSeconds: 60}}})
	}
	if err := db.PutUsageRecords(ctx, "hp", r); err != nil {
		t.Fatal(err)
	}
	if err := db.PutUsageRecords(ctx, "other", store.UsageRecords{Allocs: []usage.Alloc{{Key: "elsewhere", Team: "a", Start: h0}}}); err != nil {
		t.Fatal(err)
	}
	from, to := h0, h0.Add(2*time.Hour)
	all, err := db.UsageRecordsIn(ctx, "hp", from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.UsageRecords{}
	for _, a := range all.Allocs {
		w := want[a.Team]
		w.Allocs = append(w.Allocs, a)
		want[a.Team] = w
	}
	for _, x := range all.Workloads {
		w := want[x.Team]
		w.Workloads = append(w.Workloads, x)
		want[x.Team] = w
	}
	var seen []string
	got := map[string]store.UsageRecords{}
	if err := db.EachTeamUsageIn(ctx, "hp", from, to, func(team string, r store.UsageRecords) error {
		seen = append(seen, team)
		if _, twice := got[team]; twice {
			t.Errorf("team %q handed over twice", team)
		}
		got[team] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(seen) || len(seen) != len(want) {
		t.Errorf("teams handed over: %q, want each of the %d once, in byte order", seen, len(want))
	}
	for _, r := range got { // within a team, in no particular order
		slices.SortFunc(r.Allocs, func(a, b usage.Alloc) int { return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.Key, b.Key)) })
		slices.SortFunc(r.Workloads, func(a, b usage.Workload) int { return strings.Compare(a.Key, b.Key) })
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records by team differ from UsageRecordsIn's:\n got %+v\nwant %+v", got, want)
	}
	if len(want["b"].Workloads) == 0 || len(want["é"].Allocs) == 0 || len(want["b"].Allocs)+len(want["é"].Workloads) != 0 {
		t.Fatalf("the fixture lost its team of Workloads only or of pods only: %+v", want)
	}
	stop := errors.New("stop")
	n := 0
	if err := db.EachTeamUsageIn(ctx, "hp", from, to, func(string, store.UsageRecords) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: got %v after %d calls, want it at once", err, n)
	}
}

// An in-memory SQLite database has a pool of one connection: the walk's
// two queries share it rather than wait for a second that never comes.
func TestEachTeamUsageInMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	db, err := store.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	r := store.UsageRecords{
		Allocs:    []usage.Alloc{{Key: "p1", Team: "red", Start: h0}, {Key: "p2", Team: "blue", Start: h0}},
		Workloads: []usage.Workload{{Key: "w1", Team: "red", Created: h0}},
	}
	if err := db.PutUsageRecords(ctx, "hp", r); err != nil {
		t.Fatal(err)
	}
	var teams []string
	if err := db.EachTeamUsageIn(ctx, "hp", h0, h0.Add(time.Hour), func(team string, r store.UsageRecords) error {
		teams = append(teams, fmt.Sprintf("%s:%d+%d", team, len(r.Allocs), len(r.Workloads)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"blue:1+0", "red:1+1"}; !slices.Equal(teams, want) {
		t.Errorf("teams = %q, want %q", teams, want)
	}
}

// EachTeamUsageAsOf reads what was committed before it called began, and
// nothing committed after (the collector's flush writes its records from
// then on and lays them over what it reads): a pod written in began, of
// a team read and of a team of its own, and a Workload, are not read;
// EachTeamUsageIn afterwards reads them.
func TestEachTeamUsageAsOfReadsWhatWasCommittedBeforeBegan(t *testing.T) {
	ctx := t.Context()
	db, _ := openDB(t, true)
	h0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	pod := func(key, team string) usage.Alloc {
		return usage.Alloc{Key: key, Team: team, Namespace: "ns-" + team, InstanceType: "ml.p5.48xlarge", Accelerators: 1, Start: h0, Status: "Running"}
	}
	if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Allocs: []usage.Alloc{pod("p1", "a"), pod("p2", "b")},
		Workloads: []usage.Workload{{Key: "w1", Name: "w1", Team: "b", Namespace: "ns-b", Created: h0}}}); err != nil {
		t.Fatal(err)
	}
	read := func(began func()) (string, int) {
		t.Helper()
		var got []string
		calls := 0
		if err := db.EachTeamUsageAsOf(ctx, "hp", h0, h0.Add(time.Hour), func() {
			calls++
			if began != nil {
				began()
			}
		}, func(team string, r store.UsageRecords) error {
			for _, a := range r.Allocs {
				got = append(got, team+":"+a.Key)
			}
			for _, w := range r.Workloads {
				got = append(got, team+":"+w.Key)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return strings.Join(got, " "), calls
	}
	got, calls := read(func() {
		if err := db.PutUsageRecords(ctx, "hp", store.UsageRecords{Allocs: []usage.Alloc{pod("p3", "a"), pod("p4", "c")},
			Workloads: []usage.Workload{{Key: "w2", Name: "w2", Team: "a", Namespace: "ns-a", Created: h0}}}); err != nil {
			t.Fatal(err)
		}
	})
	if want := "a:p1 b:p2 b:w1"; got != want || calls != 1 {
		t.Errorf("read with a write in began (called %d times): %s, want %s, once", calls, got, want)
	}
	if got, _ := read(nil); got != "a:p1 a:p3 a:w2 b:p2 b:w1 c:p4" {
		t.Errorf("read after: %s, want every record", got)
	}
}
