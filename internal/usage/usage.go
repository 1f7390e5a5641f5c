package usage

import "time"

// Source says where a row came from. Demo rows are seeded by `make run`
// (--dev, no cluster) and every page that shows them says so.
type Source string

const (
	SourceCluster Source = "cluster"
	SourceDemo    Source = "demo"
)

// Hour is one team's use of one instance type in one namespace during one
// clock hour (UTC), integrated over time from the intervals its tasks held
// resources, so that a task shorter than any sampling period still counts.
//
// Quantities are integers of exact units: accelerator-seconds (GPUs or
// Neuron cores, whichever the instance type carries), millicore-seconds of
// CPU and MiB-seconds of memory. Guaranteed is the part within the team's
// guaranteed quota for the type; Borrowed is what it held above it (from
// idle capacity lent by other teams) — the split of HyperPod's own usage
// report (allocated vs borrowed hours).
type Hour struct {
	Team         string
	Namespace    string
	InstanceType string
	Start        time.Time // the hour's first instant, UTC, on the hour

	GuaranteedAccelSeconds int64
	BorrowedAccelSeconds   int64
	CPUMilliSeconds        int64 // all the CPU held, within the guarantee and borrowed
	MemoryMiBSeconds       int64
	// BorrowedCPUMilliSeconds is the part of CPUMilliSeconds held above the
	// team's CPU guarantee in force (IntegrateSplit), as HyperPod's report
	// splits vCPU hours; 0 in hours recorded before the collector split CPU
	// (migration 00030), which count all their CPU as within the guarantee.
	BorrowedCPUMilliSeconds int64

	// Tasks that ran, waited or were preempted at some time in the hour.
	Running, Pending, Preempted int
	// Wait-time percentiles (creation to admission) of the workloads
	// admitted in this hour, in seconds; -1 when none was admitted.
	WaitP50Seconds, WaitP90Seconds, WaitP99Seconds int64

	Source Source
}

// AccelSeconds is the hour's allocated accelerator-seconds.
func (h Hour) AccelSeconds() int64 { return h.GuaranteedAccelSeconds + h.BorrowedAccelSeconds }

// GuaranteedCPUMilliSeconds is the hour's CPU held within the team's CPU
// guarantee.
func (h Hour) GuaranteedCPUMilliSeconds() int64 { return h.CPUMilliSeconds - h.BorrowedCPUMilliSeconds }

// ClusterHour is one instance type of a cluster during one clock hour: the
// accelerator-seconds its schedulable nodes offered and how many of them any
// team held. Idle capacity is the difference.
type ClusterHour struct {
	Cluster               string
	InstanceType          string
	Start                 time.Time
	CapacityAccelSeconds  int64
	AllocatedAccelSeconds int64
	UnhealthyNodeSeconds  int64 // node-seconds not Schedulable by HyperPod's health label
	Source                Source
}

// IdleAccelSeconds is capacity nobody held (never negative: allocation above
// capacity is a counting artefact of node churn and is not idle).
func (c ClusterHour) IdleAccelSeconds() int64 {
	return max(0, c.CapacityAccelSeconds-c.AllocatedAccelSeconds)
}

// Missing is a period for which usage could not be recovered (the collector
// was not running and pods that ended meanwhile are gone). Every page and
// statement whose period it touches lists it, as HyperPod's reports list
// their missing data periods.
type Missing struct {
	Cluster  string
	From, To time.Time
	Reason   string
}

// Overlaps reports whether m touches [from, to).
func (m Missing) Overlaps(from, to time.Time) bool {
	return m.From.Before(to) && m.To.After(from)
}

// Earlier is the earlier of a and b.
func Earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Later is the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// HourStart truncates t to its UTC clock hour.
func HourStart(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }
