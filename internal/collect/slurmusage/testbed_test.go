package slurmusage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// sbatch submits a batch job as user (a member submits, not the portal),
// as internal/slurm's test bed test does.
func sbatch(t *testing.T, conf, user string, args ...string) string {
	t.Helper()
	argv := append([]string{"-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null"}, args...)
	cmd := exec.Command("runuser", argv...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch as %s %v: %v: %s", user, args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

// TestSlurmUsageOnTestBed: jobs a red member runs on the test bed's Slurm
// under the team's account, on its declared GPUs, appear in the team's
// hourly usage with the GPU-seconds sacct reports, to the second: the
// oracle is computed here, second by second, from the Start, End and
// AllocTRES Slurm recorded (never from the jobs' requested lengths), split
// within the team's guarantee (4 GPUs) and above it. A job that waited
// for the GPUs counts as pending in the hours of its wait, and the waits
// are Start - Submit as Slurm recorded them.
func TestSlurmUsageOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	user := testenv.SlurmUsers(t, "red")[0]
	ctx := t.Context()
	run := slurm.Local{Conf: conf}
	acct := testAccount(t, run, "su", user)

	// Two jobs that overlap: 3 and 2 GPUs, 5 together, above the team's
	// guarantee of 4 while both run; a third asks for all 8 GPUs, so it
	// pends until both have ended.
	ids := []string{
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:3", "--wrap", "sleep 4"),
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:2", "--wrap", "sleep 6"),
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:8", "--wrap", "sleep 1"),
	}
	rows := completed(t, run, ids)

	db := migratedDB(t)
	const itype = "ml.g5.12xlarge"
	r := &Reader{Runner: run, Store: committed{DB: db, versions: []store.Version{slurmVersion("red", "test-bed", acct)}},
		Cluster: "test-bed", Owner: "test", InstanceTypes: map[string]string{partition: itype},
		Guarantees: func(context.Context) (usage.GuaranteeHistory, error) {
			return usage.Guarantees{"red": {itype: 4}}.History(), nil
		}}
	if err := r.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	o := oracleOf(t, rows, 4)
	want, wantPending, waits, lo := o.gpuSeconds, o.pending, o.waits, o.lo
	if len(wantPending) == 0 {
		t.Errorf("no job waited, though the third needs the GPUs the first two hold: %v", rows)
	}
	hours, err := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: time.Unix(lo, 0).Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[time.Time][2]int64{}
	gotPending := map[time.Time]int{}
	running := 0
	for _, h := range hours {
		if h.Namespace != usage.SlurmNamespace(acct) || h.InstanceType != itype {
			t.Errorf("row %+v: want namespace %s, instance type %s", h, usage.SlurmNamespace(acct), itype)
		}
		got[h.Start] = [2]int64{h.GuaranteedAccelSeconds, h.BorrowedAccelSeconds}
		running += h.Running
		if h.Pending > 0 {
			gotPending[h.Start] = h.Pending
		}
	}
	if fmt.Sprint(gotPending) != fmt.Sprint(wantPending) {
		t.Errorf("pending jobs per hour = %v; from sacct's Submit and Start %v", gotPending, wantPending)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GPU-seconds per hour (within the guarantee, above it) = %v; from sacct's records %v", got, want)
	}
	var borrowed int64
	for _, v := range want {
		borrowed += v[1]
	}
	if borrowed == 0 {
		t.Logf("the jobs did not overlap on this run (Slurm recorded %v): nothing above the guarantee to check", rows)
	}
	if running < len(ids) {
		t.Errorf("running counts %d over the hours, want each of the %d jobs at least once", running, len(ids))
	}
	for _, h := range hours {
		for _, w := range []int64{h.WaitP50Seconds, h.WaitP99Seconds} {
			if w != -1 && !slices.Contains(waits, w) {
				t.Errorf("hour %s: wait %d s is none of sacct's Start - Submit %v", h.Start, w, waits)
			}
		}
	}
}

// TestSlurmRequeueOnTestBed: a running job an admin requeues (scontrol
// requeue) leaves, with sacct --duplicates, a record of its first run
// that ended in state REQUEUED; the reader counts it as a preemption in
// the hour it ended, as many as sacct's own records say, and records each
// run as a job of its own (keyed by its submit time, which the requeue
// reset).
func TestSlurmRequeueOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	user := testenv.SlurmUsers(t, "red")[1]
	ctx := t.Context()
	run := slurm.Local{Conf: conf}
	acct := testAccount(t, run, "rq", user)
	id := sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:1", "--requeue", "--wrap", "sleep 60")
	waitFor := func(what string, ok func([]map[string]string) bool) []map[string]string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			rows, err := slurm.Query(ctx, run, "sacct", "-X", "-D", "-P", "-j", id, "-o", "JobID,State,Submit,Start,End")
			if err != nil {
				t.Fatal(err)
			}
			if ok(rows) {
				return rows
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: sacct shows %v", what, rows)
			}
		}
	}
	waitFor("the job runs", func(rows []map[string]string) bool { return len(rows) == 1 && rows[0]["State"] == "RUNNING" })
	time.Sleep(2 * time.Second)
	if _, err := run.Run(ctx, "scontrol", "requeue", id); err != nil {
		t.Fatal(err)
	}
	waitFor("the first run's record ends as requeued", func(rows []map[string]string) bool {
		for _, r := range rows {
			if usage.SlurmPreempted(r["State"]) && r["End"] != "Unknown" {
				return len(rows) >= 2
			}
		}
		return false
	})

	db := migratedDB(t)
	r := &Reader{Runner: run, Store: committed{DB: db, versions: []store.Version{slurmVersion("red", "test-bed", acct)}},
		Cluster: "test-bed", Owner: "test", InstanceTypes: map[string]string{partition: "ml.g5.12xlarge"},
		Guarantees: func(context.Context) (usage.GuaranteeHistory, error) { return usage.GuaranteeHistory{}, nil }}
	if err := r.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// sacct may have moved on since (the second run started): read the
	// records the reader read, by the same query, for the oracle.
	rows, _ := slurm.Query(ctx, run, "sacct", "-X", "-D", "-P", "-j", id, "-o", "JobID,State,Submit,Start,End")
	if len(rows) < 2 {
		t.Fatalf("sacct -D shows %v", rows)
	}
	want := map[time.Time]int{}
	for _, rec := range rows {
		if usage.SlurmPreempted(rec["State"]) && rec["End"] != "Unknown" {
			end, err := time.ParseInLocation("2006-01-02T15:04:05", rec["End"], time.Local)
			if err != nil {
				t.Fatal(err)
			}
			want[end.UTC().Truncate(time.Hour)]++
		}
	}
	recs, err := db.UsageRecordsIn(ctx, r.RecordCluster(), time.Now().Add(-3*time.Hour), time.Now().Add(time.Hour))
	if err != nil || len(recs.Workloads) != len(rows) {
		t.Errorf("recorded %d runs (%v), sacct -D shows %d: %v", len(recs.Workloads), err, len(rows), rows)
	}
	hours, err := db.UsageHours(ctx, store.UsageFilter{Team: "red", From: time.Now().Add(-3 * time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[time.Time]int{}
	for _, h := range hours {
		if h.Preempted > 0 {
			got[h.Start] = h.Preempted
		}
	}
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("preemptions per hour = %v; sacct's requeued or preempted records %v (%v)", got, want, rows)
	}
}

// oracle is what Slurm recorded of a set of jobs (sacct -X -P rows with
// JobID, Submit, Start, End, ElapsedRaw, AllocTRES), as the usage rows
// must show it for a team with guarantee GPUs: GPU-seconds per hour
// within the guarantee and above it, the jobs pending in each hour
// (Submit until Start), each job's wait, and the first start.
type oracle struct {
	gpuSeconds map[time.Time][2]int64
	pending    map[time.Time]int
	waits      []int64
	lo         int64
}

func oracleOf(t *testing.T, rows []map[string]string, guarantee int64) oracle {
	t.Helper()
	type rec struct {
		start, end, submit int64
		gpus               int64
	}
	var recs []rec
	o := oracle{gpuSeconds: map[time.Time][2]int64{}, pending: map[time.Time]int{}, lo: 1 << 62}
	hi := int64(0)
	for _, j := range rows {
		parse := func(f string) int64 {
			at, err := time.ParseInLocation("2006-01-02T15:04:05", j[f], time.Local)
			if err != nil {
				t.Fatalf("job %s %s %q: %v", j["JobID"], f, j[f], err)
			}
			return at.Unix()
		}
		gpus := int64(0)
		for _, kv := range strings.Split(j["AllocTRES"], ",") {
			if v, ok := strings.CutPrefix(kv, "gres/gpu="); ok {
				gpus, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		x := rec{start: parse("Start"), end: parse("End"), submit: parse("Submit"), gpus: gpus}
		if el, _ := strconv.ParseInt(j["ElapsedRaw"], 10, 64); el != x.end-x.start || gpus == 0 {
			t.Fatalf("job %s: ElapsedRaw %s, End - Start %d, GPUs %d", j["JobID"], j["ElapsedRaw"], x.end-x.start, gpus)
		}
		recs = append(recs, x)
		o.waits = append(o.waits, x.start-x.submit)
		o.lo, hi = min(o.lo, x.start), max(hi, x.end)
	}
	for _, x := range recs {
		if x.start > x.submit {
			for h := time.Unix(x.submit, 0).UTC().Truncate(time.Hour); h.Unix() < x.start; h = h.Add(time.Hour) {
				o.pending[h]++
			}
		}
	}
	for s := o.lo; s < hi; s++ {
		var held int64
		for _, x := range recs {
			if x.start <= s && s < x.end {
				held += x.gpus
			}
		}
		h := time.Unix(s, 0).UTC().Truncate(time.Hour)
		v := o.gpuSeconds[h]
		v[0], v[1] = v[0]+min(held, guarantee), v[1]+max(0, held-guarantee)
		o.gpuSeconds[h] = v
	}
	return o
}

// completed waits until sacct records every job of ids COMPLETED with an
// end, and returns their records (JobID, State, Submit, Start, End,
// ElapsedRaw, AllocTRES).
func completed(t *testing.T, run slurm.Runner, ids []string) []map[string]string {
	t.Helper()
	var rows []map[string]string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		if rows, err = slurm.Query(t.Context(), run, "sacct", "-X", "-P", "-j", strings.Join(ids, ","),
			"-o", "JobID,State,Submit,Start,End,ElapsedRaw,AllocTRES"); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, j := range rows {
			if j["State"] == "COMPLETED" && j["End"] != "Unknown" {
				done++
			}
		}
		if done == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs did not complete: %v", rows)
		}
	}
	return rows
}

// TestSlurmReaderRunLoopOnTestBed: the reader as the portal runs it (Run:
// it claims the cluster, then flushes and refreshes the inventory every
// Interval until stopped, then flushes once more), with a second reader
// started beside it, as a second replica would be. While two of a
// member's jobs run and end, the usage rows come to show, per hour, the
// GPU-seconds within the team's guarantee and above it that sacct's
// records give (the oracle), with no flush called by the test; the
// inventory shows the test bed's node under its partition's instance
// type; and when stopped both readers return without error: the second
// waited, and never took the first's cluster (the first's flushes would
// have failed with store.ErrCollectorLost).
func TestSlurmReaderRunLoopOnTestBed(t *testing.T) {
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	node := testenv.Require(t, "PORTAL_TEST_SLURM_NODE")
	user := testenv.SlurmUsers(t, "blue")[0]
	run := slurm.Local{Conf: conf}
	acct := testAccount(t, run, "rl", user)

	db := migratedDB(t)
	const itype = "ml.g5.12xlarge"
	reader := func(owner string) *Reader {
		return &Reader{Runner: run, Store: committed{DB: db, versions: []store.Version{slurmVersion("red", "test-bed", acct)}},
			Cluster: "test-bed", Owner: owner, InstanceTypes: map[string]string{partition: itype}, InventoryCluster: "test-bed",
			// Taken over when its heartbeat is 3 intervals old: long
			// enough for a flush on a loaded machine.
			Interval: 2 * time.Second,
			Guarantees: func(context.Context) (usage.GuaranteeHistory, error) {
				return usage.Guarantees{"red": {itype: 4}}.History(), nil
			}}
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	ended := make(chan error, 2)
	go func() { ended <- reader("first").Run(ctx) }()
	time.Sleep(500 * time.Millisecond) // the first claims the cluster
	go func() { ended <- reader("second").Run(ctx) }()

	ids := []string{
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:3", "--wrap", "sleep 3"),
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:2", "--wrap", "sleep 5"),
	}
	o := oracleOf(t, completed(t, run, ids), 4)
	var got map[time.Time][2]int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		hours, err := db.UsageHours(t.Context(), store.UsageFilter{Team: "red", From: time.Unix(o.lo, 0).Add(-time.Hour), To: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		got = map[time.Time][2]int64{}
		for _, h := range hours {
			got[h.Start] = [2]int64{h.GuaranteedAccelSeconds, h.BorrowedAccelSeconds}
		}
		if fmt.Sprint(got) == fmt.Sprint(o.gpuSeconds) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(o.gpuSeconds) {
		t.Errorf("GPU-seconds per hour (within the guarantee, above it) written by the running reader = %v; from sacct's records %v", got, o.gpuSeconds)
	}
	inv, err := db.Observed(t.Context(), "test-bed")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv) != 1 || inv[0].InstanceType != itype || inv[0].Nodes != 1 || inv[0].Basis != slurm.BasisNodes {
		t.Errorf("inventory kept by the running reader = %+v; want node %s as one %s", inv, node, itype)
	}
	stop()
	for range 2 {
		select {
		case err := <-ended:
			if err != nil {
				t.Errorf("a reader's Run returned %v when stopped; want nil (a first reader whose cluster was taken returns store.ErrCollectorLost)", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a reader's Run did not return within 30 s of being stopped")
		}
	}
}

// testAccount adds a Slurm account of this run (prefix and a number) with
// user's association, both removed (and the account's jobs cancelled) when
// the test ends.
func testAccount(t *testing.T, run slurm.Runner, prefix, user string) string {
	t.Helper()
	acct := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1_000_000_000)
	for _, args := range [][]string{{"add", "account", acct, "Description=slurm-usage-test", "Organization=portal"}, {"add", "user", user, "account=" + acct}} {
		if _, err := run.Run(t.Context(), "sacctmgr", append([]string{"-i"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		run.Run(ctx, "scancel", "--account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "user", "name="+user, "account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "account", acct)
	})
	return acct
}
