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
	acct := fmt.Sprintf("su%d", time.Now().UnixNano()%1_000_000_000)
	admin := func(args ...string) {
		t.Helper()
		if _, err := run.Run(ctx, "sacctmgr", append([]string{"-i"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	admin("add", "account", acct, "Description=slurm-usage-test", "Organization=portal")
	t.Cleanup(func() {
		ctx := context.Background()
		run.Run(ctx, "scancel", "--account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "user", "name="+user, "account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "account", acct)
	})
	admin("add", "user", user, "account="+acct)

	// Two jobs that overlap: 3 and 2 GPUs, 5 together, above the team's
	// guarantee of 4 while both run; a third asks for all 8 GPUs, so it
	// pends until both have ended.
	ids := []string{
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:3", "--wrap", "sleep 4"),
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:2", "--wrap", "sleep 6"),
		sbatch(t, conf, user, "--account="+acct, "--partition="+partition, "--gres=gpu:8", "--wrap", "sleep 1"),
	}
	var rows []map[string]string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		if rows, err = slurm.Query(ctx, run, "sacct", "-X", "-P", "-j", strings.Join(ids, ","),
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

	// The oracle, from what Slurm recorded.
	type rec struct {
		start, end, submit int64
		gpus               int64
	}
	var recs []rec
	lo, hi := int64(1<<62), int64(0)
	var waits []int64
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
		waits = append(waits, x.start-x.submit)
		lo, hi = min(lo, x.start), max(hi, x.end)
	}
	// Pending: the jobs whose wait (Submit until Start, as recorded)
	// touches each hour.
	wantPending := map[time.Time]int{}
	for _, x := range recs {
		if x.start > x.submit {
			for h := time.Unix(x.submit, 0).UTC().Truncate(time.Hour); h.Unix() < x.start; h = h.Add(time.Hour) {
				wantPending[h]++
			}
		}
	}
	if len(wantPending) == 0 {
		t.Errorf("no job waited, though the third needs the GPUs the first two hold: %v", rows)
	}
	want := map[time.Time][2]int64{}
	for s := lo; s < hi; s++ {
		var held int64
		for _, x := range recs {
			if x.start <= s && s < x.end {
				held += x.gpus
			}
		}
		h := time.Unix(s, 0).UTC().Truncate(time.Hour)
		v := want[h]
		v[0], v[1] = v[0]+min(held, 4), v[1]+max(0, held-4)
		want[h] = v
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
	acct := fmt.Sprintf("rq%d", time.Now().UnixNano()%1_000_000_000)
	for _, args := range [][]string{{"add", "account", acct, "Description=slurm-usage-test", "Organization=portal"}, {"add", "user", user, "account=" + acct}} {
		if _, err := run.Run(ctx, "sacctmgr", append([]string{"-i"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		run.Run(ctx, "scancel", "--account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "user", "name="+user, "account="+acct)
		run.Run(ctx, "sacctmgr", "-i", "delete", "account", acct)
	})
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
