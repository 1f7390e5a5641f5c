package usage

import (
	"slices"
	"time"
)

// TeamHour is a team's use in one clock hour, summed over its namespaces and
// instance types: what the team usage page plots.
type TeamHour struct {
	Start                  time.Time
	GuaranteedAccelSeconds int64
	BorrowedAccelSeconds   int64
	Running, Pending       int
	Preempted              int
	// The worst (largest) wait-time percentiles among the hour's rows:
	// percentiles of different instance types cannot be merged exactly, so
	// the page shows an upper bound and says so. -1: nothing was admitted.
	WaitP50Seconds, WaitP90Seconds, WaitP99Seconds int64
	Demo                                           bool // a row of the hour is demo data
}

// AccelSeconds is the hour's allocated accelerator-seconds.
func (h TeamHour) AccelSeconds() int64 { return h.GuaranteedAccelSeconds + h.BorrowedAccelSeconds }

// SumByHour folds rows into one TeamHour per clock hour, oldest first.
func SumByHour(rows []Hour) []TeamHour {
	idx := map[time.Time]int{}
	var out []TeamHour
	for _, r := range rows {
		at := HourStart(r.Start)
		i, ok := idx[at]
		if !ok {
			i = len(out)
			idx[at] = i
			out = append(out, TeamHour{Start: at, WaitP50Seconds: -1, WaitP90Seconds: -1, WaitP99Seconds: -1})
		}
		h := &out[i]
		h.GuaranteedAccelSeconds += r.GuaranteedAccelSeconds
		h.BorrowedAccelSeconds += r.BorrowedAccelSeconds
		h.Running += r.Running
		h.Pending += r.Pending
		h.Preempted += r.Preempted
		h.WaitP50Seconds = max(h.WaitP50Seconds, r.WaitP50Seconds)
		h.WaitP90Seconds = max(h.WaitP90Seconds, r.WaitP90Seconds)
		h.WaitP99Seconds = max(h.WaitP99Seconds, r.WaitP99Seconds)
		h.Demo = h.Demo || r.Source == SourceDemo
	}
	slices.SortFunc(out, func(a, b TeamHour) int { return a.Start.Compare(b.Start) })
	return out
}

// DayStart truncates t to its UTC day.
func DayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Days are the UTC days that [from, to) touches, oldest first.
func Days(from, to time.Time) []time.Time {
	var out []time.Time
	for d := DayStart(from); d.Before(to); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of values:
// the smallest value that at least p% of them do not exceed, i.e. the
// ceil(p/100 × n)-th smallest. It never interpolates, so it is always one of
// the samples and can be checked by hand. ok is false for no values.
func Percentile(values []int64, p int) (v int64, rank int, ok bool) {
	if len(values) == 0 || p <= 0 || p > 100 {
		return 0, 0, false
	}
	s := slices.Clone(values)
	slices.Sort(s)
	// ceil(p × n / 100) in integers.
	rank = (p*len(s) + 99) / 100
	return s[rank-1], rank, true
}
