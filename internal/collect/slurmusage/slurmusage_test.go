package slurmusage

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// committed is the store with the committed versions a test gives (a
// Slurm contract cannot be approved through the workflow yet).
type committed struct {
	*store.DB
	versions []store.Version
}

func (c committed) CommittedVersions(context.Context) ([]store.Version, error) {
	return c.versions, nil
}

func slurmVersion(team, cluster, account string) store.Version {
	c := workflow.ExampleContractFor(team)
	c.Orchestrator, c.ClusterName, c.Namespaces = workflow.OrchestratorSlurm, cluster, nil
	c.SlurmScope = workflow.SlurmScope{Account: account, Partition: "gpu", QoS: "normal"}
	return store.Version{Contract: c}
}

func migratedDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// fakeSacct answers sacct with the lines of the jobs whose account the
// -A filter names (or whose id -j names), and records each call.
type fakeSacct struct {
	lines []string // SacctFormat lines
	calls [][]string
}

// Run refuses: the reader must run sacct with SacctEnv.
func (f *fakeSacct) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s without SLURM_TIME_FORMAT=%%s: its times would be the node's local time", name)
}

// epochLine is a line of the fixtures (times as UTC dates, for reading) as
// sacct prints it with SacctEnv: Submit, Start and End in seconds since
// the epoch.
func epochLine(l string) string {
	fs := strings.Split(l, "|")
	for i := 6; i <= 8; i++ {
		if at, err := time.Parse("2006-01-02T15:04:05", fs[i]); err == nil {
			fs[i] = strconv.FormatInt(at.Unix(), 10)
		}
	}
	return strings.Join(fs, "|")
}

// RunEnv answers sacct run with SacctEnv.
func (f *fakeSacct) RunEnv(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
	if name != "sacct" || !slices.Equal(env, []string{"SLURM_TIME_FORMAT=%s", "TZ=UTC"}) {
		return nil, fmt.Errorf("unexpected %v %s", env, name)
	}
	f.calls = append(f.calls, args)
	var accounts, ids []string
	for i, a := range args {
		switch a {
		case "-A":
			accounts = strings.Split(args[i+1], ",")
		case "-j":
			ids = strings.Split(args[i+1], ",")
		}
	}
	out := strings.ReplaceAll(SacctFormat, ",", "|") + "\n"
	for _, l := range f.lines {
		fs := strings.Split(l, "|")
		if (accounts != nil && slices.Contains(accounts, fs[1])) || (ids != nil && slices.Contains(ids, fs[0])) {
			out += epochLine(l) + "\n"
		}
	}
	return []byte(out), nil
}

// TestParseJob: sacct's times in seconds since the epoch (SacctEnv),
// Unknown and None as no time, AllocTRES's GPUs, CPUs and memory in its
// units; a time in another form is an error naming the field.
func TestParseJob(t *testing.T) {
	submit, start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 9, 0, 5, 0, time.UTC)
	row := map[string]string{"JobID": "7", "Account": "acct", "User": "u", "Partition": "gpu", "QOS": "normal",
		"AllocTRES": "billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=2G,node=1", "Submit": strconv.FormatInt(submit.Unix(), 10),
		"Start": strconv.FormatInt(start.Unix(), 10), "End": "Unknown", "ElapsedRaw": "3", "State": "RUNNING", "NodeList": "n1"}
	j, err := ParseJob(row)
	if err != nil {
		t.Fatal(err)
	}
	if j.GPUs != 2 || j.CPUs != 4 || j.MemoryMiB != 2048 || !j.End.IsZero() || !j.Start.Equal(start) || !j.Submit.Equal(submit) {
		t.Errorf("ParseJob = %+v", j)
	}
	row["Start"], row["AllocTRES"], row["State"] = "Unknown", "", "PENDING"
	if j, err = ParseJob(row); err != nil || !j.Start.IsZero() || j.GPUs != 0 {
		t.Errorf("pending: %+v, %v", j, err)
	}
	// A local time (sacct without SLURM_TIME_FORMAT) is refused, not
	// read in some zone.
	for field, bad := range map[string]string{"Submit": "yesterday", "AllocTRES": "gres/gpu=two", "End": "2026-12-01T10:00:00", "Start": "-5"} {
		r := maps(row)
		r[field] = bad
		if _, err := ParseJob(r); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s %q: error %v, want one naming the field", field, bad, err)
		}
	}
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestReaderFlush: the reader maps the accounts of this cluster's Slurm
// contracts to their teams (in lower case, as Slurm keeps them; another
// cluster's and EKS contracts are not read), asks sacct for every user's
// allocations with every record of a requeued job since the heartbeat
// less the margin, records them and replaces the hours; a job recorded as
// running that sacct no longer lists since then is read by its id, and the
// hours from its end are recomputed; a job read for the first time is
// recomputed from its submit.
func TestReaderFlush(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	st := committed{DB: db, versions: []store.Version{
		slurmVersion("red", "hp-slurm", "Red-Acct"), slurmVersion("blue", "other-cluster", "blue-acct"),
		{Contract: workflow.ExampleContractFor("green")},
	}}
	run := &fakeSacct{lines: []string{
		"101|red-acct|u1|gpu|normal|cpu=2,gres/gpu=4,mem=1000M,node=1|2026-12-01T09:58:00|2026-12-01T09:59:00|Unknown|0|RUNNING|n1",
		"102|blue-acct|u2|gpu|normal|cpu=2,gres/gpu=4,mem=1000M,node=1|2026-12-01T09:58:00|2026-12-01T09:59:00|Unknown|0|RUNNING|n1",
	}}
	clk := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	r := &Reader{Runner: run, Store: st, Cluster: "hp-slurm", Owner: "t", Now: func() time.Time { return clk },
		InstanceTypes: map[string]string{"gpu": "ml.p5.48xlarge"},
		Guarantees: func(context.Context) (usage.GuaranteeHistory, error) {
			return usage.Guarantees{"red": {"ml.p5.48xlarge": 3}}.History(), nil
		}}
	if err := r.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(run.calls) != 1 || !slices.Equal(run.calls[0][:5], []string{"-a", "-X", "-D", "-P", "--format=" + SacctFormat}) ||
		!slices.Equal(run.calls[0][5:], []string{"-A", "red-acct", "-S", "2026-11-30T10:30:00", "-E", "2027-12-01T10:30:00"}) {
		t.Fatalf("sacct calls = %q", run.calls)
	}
	hours, err := db.UsageHours(ctx, store.UsageFilter{From: clk.Add(-2 * time.Hour), To: clk})
	if err != nil {
		t.Fatal(err)
	}
	want := []usage.Hour{
		{Team: "red", Namespace: "slurm:red-acct", InstanceType: "ml.p5.48xlarge", Start: clk.Add(-90 * time.Minute),
			GuaranteedAccelSeconds: 3 * 60, BorrowedAccelSeconds: 60, CPUMilliSeconds: 2000 * 60, MemoryMiBSeconds: 1000 * 60,
			Running: 1, Pending: 1, WaitP50Seconds: 60, WaitP90Seconds: 60, WaitP99Seconds: 60, Source: usage.SourceCluster},
		{Team: "red", Namespace: "slurm:red-acct", InstanceType: "ml.p5.48xlarge", Start: clk.Add(-30 * time.Minute),
			GuaranteedAccelSeconds: 3 * 1800, BorrowedAccelSeconds: 1800, CPUMilliSeconds: 2000 * 1800, MemoryMiBSeconds: 1000 * 1800,
			Running: 1, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: usage.SourceCluster},
	}
	if fmt.Sprintf("%+v", hours) != fmt.Sprintf("%+v", want) {
		t.Errorf("hours =\n%+v\nwant\n%+v", hours, want)
	}

	// An hour later job 101's end (10:10) reaches the accounting
	// database late: sacct since the heartbeat less the margin no longer
	// lists it, so the reader asks for it by id and recomputes from 10:00.
	// Job 104, pending since 09:30 but listed only now (held, or
	// eligible only later), is read for the first time: its hours from
	// 09:00 are recomputed.
	run.lines = []string{"103|red-acct|u1|gpu|normal|cpu=1,gres/gpu=1,mem=1000M,node=1|2026-12-01T11:00:00|2026-12-01T11:00:00|2026-12-01T11:01:00|60|PREEMPTED|n1",
		"104|red-acct|u1|gpu|normal||2026-12-01T09:30:00|Unknown|Unknown|0|PENDING|None assigned"}
	r.Runner = &idOnly{fakeSacct: run,
		byID: "101|red-acct|u1|gpu|normal|cpu=2,gres/gpu=4,mem=1000M,node=1|2026-12-01T09:58:00|2026-12-01T09:59:00|2026-12-01T10:10:00|660|COMPLETED|n1"}
	clk = clk.Add(time.Hour)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(run.calls); n != 3 || !slices.Equal(run.calls[1][5:], []string{"-A", "red-acct", "-S", "2026-12-01T10:20:00", "-E", "2027-12-02T10:20:00"}) ||
		!slices.Equal(run.calls[2][5:], []string{"-j", "101"}) {
		t.Fatalf("sacct calls = %q", run.calls)
	}
	hours, _ = db.UsageHours(ctx, store.UsageFilter{Team: "red", From: clk.Add(-3 * time.Hour), To: clk.Add(time.Hour)})
	if len(hours) != 3 || hours[0].AccelSeconds() != 4*60 || hours[0].Pending != 2 || hours[1].AccelSeconds() != 4*600 || hours[1].Pending != 1 ||
		hours[2].AccelSeconds() != 60 || hours[2].Preempted != 1 || hours[2].Pending != 1 {
		t.Errorf("after the late end: %+v", hours)
	}
}

// idOnly answers -j with the line byID (the accounting database's late
// record) and everything else as fakeSacct does.
type idOnly struct {
	*fakeSacct
	byID string
}

func (f *idOnly) RunEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	if slices.Contains(args, "-j") {
		f.calls = append(f.calls, args)
		return []byte(strings.ReplaceAll(SacctFormat, ",", "|") + "\n" + epochLine(f.byID) + "\n"), nil
	}
	return f.fakeSacct.RunEnv(ctx, env, name, args...)
}

// TestReaderTeams: the accounts of the Slurm contracts naming the reader's
// cluster, in lower case; with no cluster, of every Slurm contract; never
// an EKS contract's.
func TestReaderTeams(t *testing.T) {
	st := committed{versions: []store.Version{slurmVersion("red", "hp-slurm", "Red-Acct"), slurmVersion("blue", "other", "blue-acct"),
		{Contract: workflow.ExampleContractFor("green")}}}
	for cluster, want := range map[string]string{"hp-slurm": "map[red-acct:red]", "": "map[blue-acct:blue red-acct:red]", "none": "map[]"} {
		got, err := (&Reader{Store: st, Cluster: cluster}).Teams(t.Context())
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("cluster %q: Teams = %v, %v; want %s", cluster, got, err, want)
		}
	}
}
