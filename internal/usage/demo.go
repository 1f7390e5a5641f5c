package usage

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

// DemoTeam is one team's part in the demo data `make run` seeds: its
// namespace, and per instance type the accelerators it is guaranteed and
// how busy it typically is.
type DemoTeam struct {
	Team, Namespace string
	Types           []DemoType
}

// DemoType is a team's use of one instance type in the demo: Guaranteed
// accelerators (0: everything it holds is borrowed) and Busy, the
// accelerators it holds at a weekday peak.
type DemoType struct {
	InstanceType     string
	Guaranteed, Busy int
}

// DemoData is what DemoUsage generates: every row has Source demo.
type DemoData struct {
	Hours   []Hour
	Cluster []ClusterHour
	Missing Missing
}

// DemoUsage generates plausible hourly usage for [from, to) (truncated to
// hours), the same for the same arguments: weekday business-hour peaks
// (09:00-18:00 UTC) above the guarantee (borrowed), quiet nights and
// weekends, queues at peaks, a few preemptions, one node unhealthy for a
// day, and one six-hour missing data period two thirds of the way through,
// with no rows. capacity is the cluster's accelerators per instance type.
func DemoUsage(teams []DemoTeam, cluster string, capacity map[string]int, from, to time.Time, seed uint64) DemoData {
	from, to = HourStart(from), HourStart(to)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	span := to.Sub(from)
	missFrom := HourStart(from.Add(span * 2 / 3))
	d := DemoData{Missing: Missing{Cluster: cluster, From: missFrom, To: missFrom.Add(6 * time.Hour),
		Reason: "demo: the collector was not running (a simulated outage)"}}
	sickFrom := DayStart(from.Add(span / 3)).Add(8 * time.Hour)
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		if d.Missing.Overlaps(h, h.Add(time.Hour)) {
			continue
		}
		load := demoLoad(h)
		held := map[string]int64{}
		for _, tm := range teams {
			for _, ty := range tm.Types {
				// Accelerators held on average this hour: the day's load
				// of the team's peak, ±20 %, whole accelerator-minutes.
				mean := float64(ty.Busy) * load * (0.8 + 0.4*rng.Float64())
				secs := int64(mean*60) * 60
				if c := int64(capacity[ty.InstanceType])*3600 - held[ty.InstanceType]; secs > c {
					secs = max(0, c)
				}
				held[ty.InstanceType] += secs
				g := min(secs, int64(ty.Guaranteed)*3600)
				row := Hour{Team: tm.Team, Namespace: tm.Namespace, InstanceType: ty.InstanceType, Start: h,
					GuaranteedAccelSeconds: g, BorrowedAccelSeconds: secs - g,
					CPUMilliSeconds: secs * 12 * 1000, MemoryMiBSeconds: secs * 120 * 1024,
					// 12 vCPUs per accelerator, split with it.
					BorrowedCPUMilliSeconds: (secs - g) * 12 * 1000,
					Running:                 int((secs + 3599) / 3600 / 2), WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1, Source: SourceDemo}
				if row.Running > 0 {
					p50 := int64(20 + rng.IntN(100))
					if load > 1 {
						p50 *= 4 // queues at the peak
						row.Pending = 1 + rng.IntN(4)
					}
					row.WaitP50Seconds, row.WaitP90Seconds, row.WaitP99Seconds = p50, p50*3, p50*3+int64(rng.IntN(600))
				}
				if row.BorrowedAccelSeconds > 0 && rng.IntN(40) == 0 {
					row.Preempted = 1 + rng.IntN(2) // borrowed capacity reclaimed
				}
				d.Hours = append(d.Hours, row)
			}
		}
		for _, typ := range slices.Sorted(maps.Keys(capacity)) {
			ch := ClusterHour{Cluster: cluster, InstanceType: typ, Start: h, CapacityAccelSeconds: int64(capacity[typ]) * 3600,
				AllocatedAccelSeconds: held[typ], Source: SourceDemo}
			if typ == firstTeamType(teams) && !h.Before(sickFrom) && h.Before(sickFrom.Add(24*time.Hour)) {
				ch.UnhealthyNodeSeconds = 3600 // one node out for a day
			}
			d.Cluster = append(d.Cluster, ch)
		}
	}
	return d
}

// demoLoad is the share of a team's peak it holds at hour h.
func demoLoad(h time.Time) float64 {
	wd, hr := h.Weekday(), h.Hour()
	switch {
	case wd == time.Saturday || wd == time.Sunday:
		return 0.2
	case hr >= 9 && hr < 18:
		return 1.1
	case hr >= 7 && hr < 21:
		return 0.6
	}
	return 0.3
}

func firstTeamType(teams []DemoTeam) string {
	if len(teams) == 0 || len(teams[0].Types) == 0 {
		return ""
	}
	return teams[0].Types[0].InstanceType
}
