package usage

import (
	"strconv"
	"strings"
	"time"
)

// SlurmJob is one job allocation as Slurm's accounting database records it
// (one line of `sacct -X`; internal/collect/slurmusage reads it): the
// account it is charged to, its partition, QOS, allocated GPUs, CPUs and
// memory, where it ran, its state and its submit, start and end times.
// Start is zero while the job has not started; End is zero while it runs
// (or pends). Times are whole seconds, as sacct prints them.
type SlurmJob struct {
	ID                       string // JobID
	Account, User, Partition string
	QOS, NodeList, State     string
	GPUs, CPUs, MemoryMiB    int64
	Submit, Start, End       time.Time
}

// SlurmNamespace is the namespace column of a Slurm account's usage rows:
// HyperPod's usage report is per namespace on EKS, and on Slurm the
// account plays that part. The "slurm:" prefix keeps it apart from every
// Kubernetes namespace (a DNS-1123 label has no colon), so a team's EKS
// and Slurm rows of one hour never share a key.
func SlurmNamespace(account string) string { return "slurm:" + account }

// SlurmNotRun is the NodeList sacct shows for a job that was given no
// nodes: it never started (cancelled while pending), even when sacct
// shows a Start (the cancel time) and zero elapsed seconds.
const SlurmNotRun = "None assigned"

// SlurmPreempted reports whether a job record ended by a preemption: state
// PREEMPTED ("Job terminated due to preemption") or REQUEUED ("Job was
// requeued"; with --duplicates each requeued run is a record of its own),
// per the JOB STATE CODES of https://slurm.schedmd.com/sacct.html. The
// state may carry a suffix ("CANCELLED by 0"): the first word counts.
func SlurmPreempted(state string) bool {
	s, _, _ := strings.Cut(state, " ")
	return s == "PREEMPTED" || s == "REQUEUED"
}

// SlurmRecords converts job records of one Slurm cluster into the records
// the EKS collector keeps for pods and Kueue Workloads, so that the same
// integrator (IntegrateSplit) splits them per team, namespace, instance
// type and hour by the same guarantee rule:
//
//   - a job that started is one Alloc holding its GPUs (accelerators),
//     CPUs and memory from Start to End (End zero: still running); a job
//     given no nodes (SlurmNotRun) never held anything;
//   - every job is one Workload created at Submit, pending from Submit
//     until Start (or its end, if it never started; open while it still
//     pends), admitted at Start after waiting Start - Submit, and
//     preempted at End when its state says so (SlurmPreempted);
//   - team and itype name each job's team (ok false: not a team's
//     account, skipped) and instance type ("" is NoInstanceType); the
//     namespace is SlurmNamespace(account), the priority class the QOS.
//
// Keys are "slurm/<cluster>/<job id>/<submit unix>": a requeued job's
// records (sacct --duplicates) differ by submit time, which Slurm resets
// on requeue (sacct(1), Submit).
func SlurmRecords(cluster string, jobs []SlurmJob, team func(account string) (string, bool), itype func(j SlurmJob) string) ([]Alloc, []Workload) {
	var allocs []Alloc
	var wls []Workload
	for _, j := range jobs {
		t, ok := team(j.Account)
		if !ok {
			continue
		}
		key := "slurm/" + cluster + "/" + j.ID + "/" + strconv.FormatInt(j.Submit.Unix(), 10)
		w := Workload{Key: key, Name: j.ID, Team: t, Namespace: SlurmNamespace(j.Account), InstanceType: itype(j),
			PriorityClass: j.QOS, Created: j.Submit.UTC(), Finished: j.End.UTC()}
		if j.End.IsZero() {
			w.Finished = time.Time{}
		}
		started := !j.Start.IsZero() && j.NodeList != SlurmNotRun && j.NodeList != ""
		pendEnd := j.End
		if started {
			pendEnd = j.Start
		}
		if pendEnd.IsZero() || pendEnd.After(j.Submit) {
			w.Pending = []Span{{From: j.Submit.UTC(), To: utcOrZero(pendEnd)}}
		}
		if started {
			w.Admissions = []Admission{{At: j.Start.UTC(), WaitSeconds: max(0, j.Start.Unix()-j.Submit.Unix())}}
			allocs = append(allocs, Alloc{Key: key, Task: key, Team: t, Namespace: w.Namespace, InstanceType: w.InstanceType,
				Accelerators: j.GPUs, CPUMilli: j.CPUs * 1000, MemoryMiB: j.MemoryMiB, Start: j.Start.UTC(), End: utcOrZero(j.End),
				Pod: j.ID, PriorityClass: j.QOS, Status: j.State})
		}
		if SlurmPreempted(j.State) && !j.End.IsZero() {
			w.Preemptions = []time.Time{j.End.UTC()}
		}
		wls = append(wls, w)
	}
	return allocs, wls
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
