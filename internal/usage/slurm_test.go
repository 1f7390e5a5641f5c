package usage

import (
	"testing"
	"time"
)

func slurmTeam(account string) (string, bool) {
	switch account {
	case "acct-red":
		return "red", true
	case "acct-blue":
		return "blue", true
	}
	return "", false
}

func slurmItype(j SlurmJob) string {
	if j.Partition == "p5" {
		return "ml.p5.48xlarge"
	}
	return ""
}

// slurmOracle is the guaranteed and borrowed GPU-seconds of team's jobs on
// one instance type per hour, counted second by second: in each second the
// GPUs of the jobs that had started and not ended, up to the guarantee
// g(second) within it and the rest above it. It shares nothing with the
// sweep.
func slurmOracle(jobs []SlurmJob, team string, g func(s int64) int64, until time.Time) map[time.Time][2]int64 {
	out := map[time.Time][2]int64{}
	var lo, hi int64 = 1 << 62, 0
	for _, j := range jobs {
		if t, _ := slurmTeam(j.Account); t != team || j.Start.IsZero() || j.NodeList == SlurmNotRun {
			continue
		}
		lo = min(lo, j.Start.Unix())
		end := until.Unix()
		if !j.End.IsZero() {
			end = j.End.Unix()
		}
		hi = max(hi, end)
	}
	for s := lo; s < hi; s++ {
		var held int64
		for _, j := range jobs {
			if t, _ := slurmTeam(j.Account); t != team || j.Start.IsZero() || j.NodeList == SlurmNotRun {
				continue
			}
			end := until.Unix()
			if !j.End.IsZero() {
				end = j.End.Unix()
			}
			if j.Start.Unix() <= s && s < end {
				held += j.GPUs
			}
		}
		h := time.Unix(s, 0).UTC().Truncate(time.Hour)
		v := out[h]
		v[0] += min(held, g(s))
		v[1] += max(0, held-g(s))
		out[h] = v
	}
	return out
}

// TestSlurmRecordsIntegrate: jobs read from Slurm's accounting become the
// EKS collector's records and are integrated by the same rule: GPU-seconds
// split at hour boundaries, within the team's guarantee in force and above
// it (against a second-by-second oracle), a running job (no End) counted
// until now, a pending job counted as pending with no GPU-seconds, a job
// cancelled while pending (no nodes) never running, waits Start - Submit,
// a preempted or requeued record counting a preemption in the hour it
// ended, and accounts of no team left out.
func TestSlurmRecordsIntegrate(t *testing.T) {
	h0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(m, s int) time.Time { return h0.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	now := at(150, 7) // 12:30:07
	jobs := []SlurmJob{
		// Across the 11:00 boundary, 3 GPUs, waited 65 s.
		{ID: "11", Account: "acct-red", Partition: "p5", QOS: "normal", NodeList: "n1", State: "COMPLETED", GPUs: 3, CPUs: 4, MemoryMiB: 1000,
			Submit: at(49, 55), Start: at(51, 0), End: at(72, 13)},
		// Overlapping it, 2 GPUs, preempted at 11:05:00.
		{ID: "12", Account: "acct-red", Partition: "p5", QOS: "low", NodeList: "n2", State: "PREEMPTED", GPUs: 2, CPUs: 2,
			Submit: at(55, 0), Start: at(55, 30), End: at(65, 0)},
		// Its requeued run, still running at now (End zero).
		{ID: "12", Account: "acct-red", Partition: "p5", QOS: "low", NodeList: "n2", State: "RUNNING", GPUs: 2, CPUs: 2,
			Submit: at(65, 0), Start: at(100, 1)},
		// Still pending since 12:10.
		{ID: "13", Account: "acct-red", Partition: "p5", QOS: "normal", State: "PENDING", Submit: at(130, 0)},
		// Cancelled while pending: sacct shows a Start at the cancel and no nodes.
		{ID: "14", Account: "acct-red", Partition: "p5", QOS: "normal", NodeList: SlurmNotRun, State: "CANCELLED by 0",
			Submit: at(5, 0), Start: at(20, 0), End: at(20, 0)},
		// Another team's account, and an account of none.
		{ID: "15", Account: "acct-blue", Partition: "p5", NodeList: "n3", State: "COMPLETED", GPUs: 1, Submit: at(0, 0), Start: at(0, 0), End: at(10, 0)},
		{ID: "16", Account: "other", Partition: "p5", NodeList: "n3", State: "COMPLETED", GPUs: 8, Submit: at(0, 0), Start: at(0, 0), End: at(90, 0)},
	}
	allocs, wls := SlurmRecords("hp", jobs, slurmTeam, slurmItype)
	if len(allocs) != 4 || len(wls) != 6 {
		t.Fatalf("allocs %d, workloads %d; want 4 started runs of team accounts and 6 team jobs", len(allocs), len(wls))
	}
	// The guarantee was 2 GPUs until 11:00:30, then 4.
	g := GuaranteeHistory{}
	g.Add("red", "ml.p5.48xlarge", time.Time{}, 2)
	g.Add("red", "ml.p5.48xlarge", at(60, 30), 4)
	hours := IntegrateSplit(h0, now, allocs, wls, g, nil)

	got := map[time.Time]Hour{}
	for _, h := range hours {
		if h.Team == "red" {
			if h.Namespace != "slurm:acct-red" || h.InstanceType != "ml.p5.48xlarge" {
				t.Errorf("row %+v: want namespace slurm:acct-red, instance type ml.p5.48xlarge", h)
			}
			got[h.Start] = h
		}
		if h.Team == "" || h.Team == "other" {
			t.Errorf("a row of no team: %+v", h)
		}
	}
	oracle := slurmOracle(jobs, "red", func(s int64) int64 {
		if s < at(60, 30).Unix() {
			return 2
		}
		return 4
	}, now)
	for _, h := range []time.Time{h0, h0.Add(time.Hour), h0.Add(2 * time.Hour)} {
		if want := oracle[h]; got[h].GuaranteedAccelSeconds != want[0] || got[h].BorrowedAccelSeconds != want[1] {
			t.Errorf("%s: guaranteed %d, borrowed %d GPU-seconds; oracle %d, %d", h.Format("15:04"),
				got[h].GuaranteedAccelSeconds, got[h].BorrowedAccelSeconds, want[0], want[1])
		}
	}

	// 10:00: jobs 11 and 12 ran; job 14 waited and never ran; waits 65 s
	// and 30 s were admitted in it.
	if r := got[h0]; r.Running != 2 || r.Pending != 3 || r.Preempted != 0 || r.WaitP50Seconds != 30 || r.WaitP99Seconds != 65 {
		t.Errorf("10:00: running %d pending %d preempted %d waits p50 %d p99 %d; want 2, 3, 0, 30, 65", r.Running, r.Pending, r.Preempted, r.WaitP50Seconds, r.WaitP99Seconds)
	}
	// 11:00: 11 ran, 12 was preempted at 11:05 and its requeued run
	// waited from 11:05 to 11:40:01 (2101 s) and ran.
	if r := got[h0.Add(time.Hour)]; r.Running != 3 || r.Preempted != 1 || r.Pending != 1 || r.WaitP50Seconds != 2101 {
		t.Errorf("11:00: running %d preempted %d pending %d wait p50 %d; want 3, 1, 1, 2101", r.Running, r.Preempted, r.Pending, r.WaitP50Seconds)
	}
	// 12:00: the requeued run still runs (counted until now), 13 pends.
	r := got[h0.Add(2*time.Hour)]
	if r.Running != 1 || r.Pending != 1 || r.AccelSeconds() != 2*(30*60+7) {
		t.Errorf("12:00: running %d pending %d GPU-seconds %d; want 1, 1, %d", r.Running, r.Pending, r.AccelSeconds(), 2*(30*60+7))
	}
	// CPU and memory follow the same intervals: job 11's 4 CPUs for its
	// 540 s in 10:00, job 12's 2 for 270 s.
	if c := got[h0].CPUMilliSeconds; c != 4000*540+2000*270 {
		t.Errorf("10:00 CPU millicore-seconds %d, want %d", c, 4000*540+2000*270)
	}
}

// TestSlurmPreempted: PREEMPTED and REQUEUED records are preemptions,
// other states (with their suffixes) are not.
func TestSlurmPreempted(t *testing.T) {
	for state, want := range map[string]bool{"PREEMPTED": true, "REQUEUED": true, "COMPLETED": false, "CANCELLED by 0": false,
		"RUNNING": false, "FAILED": false, "NODE_FAIL": false, "TIMEOUT": false} {
		if SlurmPreempted(state) != want {
			t.Errorf("SlurmPreempted(%q) = %v", state, !want)
		}
	}
}
