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

// PeriodFigures are a team's figures of a period as its usage page shows
// them (and the API serves them): accelerator-seconds within the guarantee
// and borrowed, per UTC day and in all, the peaks, the preemptions and the
// waits. Every figure is computed here once, from the team's hours
// (SumByHour), for both.
type PeriodFigures struct {
	Days                                         []DayFigures
	GuaranteedAccelSeconds, BorrowedAccelSeconds int64
	PeakRunning, PeakPending, Preemptions        int
	// WaitHours is how many hours admitted a workload; the waits are -1
	// when none did. Median is the median hour's percentiles (each the
	// median of the hours' own), Worst the largest of each.
	WaitHours                       int
	MedianP50, MedianP90, MedianP99 int64
	WorstP50, WorstP90, WorstP99    int64
}

// DayFigures is one UTC day of PeriodFigures.
type DayFigures struct {
	Day                                          time.Time
	GuaranteedAccelSeconds, BorrowedAccelSeconds int64
	Preempted                                    int
}

// FiguresOf is the figures of hourly (SumByHour of the team's rows) over
// [from, to): every day the period touches, with or without use.
func FiguresOf(hourly []TeamHour, from, to time.Time) PeriodFigures {
	f := PeriodFigures{MedianP50: -1, MedianP90: -1, MedianP99: -1, WorstP50: -1, WorstP90: -1, WorstP99: -1}
	idx := map[time.Time]int{}
	for i, d := range Days(from, to) {
		idx[d] = i
		f.Days = append(f.Days, DayFigures{Day: d})
	}
	var p50s, p90s, p99s []int64
	for _, h := range hourly {
		if i, ok := idx[DayStart(h.Start)]; ok {
			d := &f.Days[i]
			d.GuaranteedAccelSeconds += h.GuaranteedAccelSeconds
			d.BorrowedAccelSeconds += h.BorrowedAccelSeconds
			d.Preempted += h.Preempted
		}
		f.GuaranteedAccelSeconds += h.GuaranteedAccelSeconds
		f.BorrowedAccelSeconds += h.BorrowedAccelSeconds
		f.PeakRunning, f.PeakPending = max(f.PeakRunning, h.Running), max(f.PeakPending, h.Pending)
		f.Preemptions += h.Preempted
		if h.WaitP50Seconds >= 0 {
			p50s, p90s, p99s = append(p50s, h.WaitP50Seconds), append(p90s, h.WaitP90Seconds), append(p99s, h.WaitP99Seconds)
			f.WorstP50, f.WorstP90, f.WorstP99 = max(f.WorstP50, h.WaitP50Seconds), max(f.WorstP90, h.WaitP90Seconds), max(f.WorstP99, h.WaitP99Seconds)
		}
	}
	f.WaitHours = len(p50s)
	if f.WaitHours > 0 {
		f.MedianP50, _, _ = Percentile(p50s, 50)
		f.MedianP90, _, _ = Percentile(p90s, 50)
		f.MedianP99, _, _ = Percentile(p99s, 50)
	}
	return f
}
