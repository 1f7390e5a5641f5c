package usage

import (
	"fmt"
	"time"
)

// SuggestionPercentile is the percentile of hourly allocation a suggested
// guarantee covers: a guarantee that covers the team's 95th-percentile hour
// leaves the rarest peaks to borrowing instead of reserving for them.
const SuggestionPercentile = 95

// MinSuggestionSamples is the history a suggestion needs: a week of hours,
// so that one busy or quiet day does not decide a guarantee.
const MinSuggestionSamples = 7 * 24

// QuotaSuggestion is a suggested guarantee for one instance type, from the
// team's hourly allocation, with everything its reasoning cites.
type QuotaSuggestion struct {
	InstanceType     string
	AccelPerInstance int
	From, To         time.Time
	// Samples are the hours of [From, To) counted: an hour with no row
	// held nothing (0). Hours inside a missing data period are left out
	// (Excluded), as their use is unknown, not zero.
	Samples, Excluded int
	// P95AccelSeconds is the nearest-rank 95th percentile of the
	// accelerator-seconds held per hour (÷ 3600: accelerators held on
	// average during that hour); it is the P95Rank-th smallest sample.
	P95AccelSeconds int64
	P95Rank         int
	// CurrentInstances is the approved guarantee; SuggestedInstances the
	// p95 in whole instances, rounded up. Valid only when Enough.
	CurrentInstances, SuggestedInstances int
	Enough                               bool
}

// SuggestGuarantee suggests a team's guarantee of instanceType from its
// hourly rows (any instance types; only instanceType's count) over
// [from, to): the p95 of accelerators held per hour, guaranteed and
// borrowed together (borrowing every day is a sign the guarantee is too
// small), in whole instances rounded up. from and to are truncated to hours.
func SuggestGuarantee(rows []Hour, missing []Missing, instanceType string, accelPerInstance, current int, from, to time.Time) QuotaSuggestion {
	from, to = HourStart(from), HourStart(to)
	s := QuotaSuggestion{InstanceType: instanceType, AccelPerInstance: accelPerInstance, From: from, To: to, CurrentInstances: current}
	held := map[time.Time]int64{}
	for _, r := range rows {
		if r.InstanceType == instanceType {
			held[HourStart(r.Start)] += r.AccelSeconds()
		}
	}
	samples, excluded := HourlySamples(held, missing, from, to)
	s.Samples, s.Excluded = len(samples), excluded
	if accelPerInstance <= 0 || s.Samples < MinSuggestionSamples {
		return s
	}
	s.P95AccelSeconds, s.P95Rank, _ = Percentile(samples, SuggestionPercentile)
	per := int64(accelPerInstance) * 3600
	s.SuggestedInstances = int((s.P95AccelSeconds + per - 1) / per)
	s.Enough = true
	return s
}

// HourlySamples lists, for each UTC hour of [from, to), the
// accelerator-seconds held that hour (held, by hour start; an hour with no
// entry held nothing: 0), leaving out the hours a missing data period
// touches (their use is unknown, not zero) and counting them in excluded.
func HourlySamples(held map[time.Time]int64, missing []Missing, from, to time.Time) (samples []int64, excluded int) {
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		if InMissing(missing, h) {
			excluded++
			continue
		}
		samples = append(samples, held[h])
	}
	return samples, excluded
}

// Standing is how a team's hourly allocation compares with its guarantee
// (GuaranteeStanding).
type Standing string

const (
	// Above: it holds more than its guarantee on average (it lives on
	// borrowed capacity).
	Above Standing = "above"
	// Below: even its 95th-percentile hour leaves part of the guarantee idle.
	Below Standing = "below"
	// Within otherwise.
	Within Standing = "within"
)

// GuaranteeStanding compares a team's hourly allocation over [from, to)
// (held, as HourlySamples takes it) with its guarantee in accelerators:
// the mean and nearest-rank p95 of accelerator-seconds per hour and the
// standing they give. ok is false when no hour could be counted.
func GuaranteeStanding(held map[time.Time]int64, missing []Missing, from, to time.Time, guaranteeAccel int) (mean, p95 int64, st Standing, ok bool) {
	samples, _ := HourlySamples(held, missing, from, to)
	if len(samples) == 0 {
		return 0, 0, "", false
	}
	var total int64
	for _, v := range samples {
		total += v
	}
	mean = total / int64(len(samples))
	p95, _, _ = Percentile(samples, 95)
	g := int64(guaranteeAccel) * 3600
	switch {
	case mean > g:
		st = Above
	case p95 < g:
		st = Below
	default:
		st = Within
	}
	return mean, p95, st, true
}

// InMissing reports whether a missing data period touches the UTC hour that
// starts at hour.
func InMissing(missing []Missing, hour time.Time) bool {
	for _, m := range missing {
		if m.Overlaps(hour, hour.Add(time.Hour)) {
			return true
		}
	}
	return false
}

// Reasoning is the suggestion's argument in plain sentences, as the pages
// show it beside the number.
func (s QuotaSuggestion) Reasoning() []string {
	period := fmt.Sprintf("%s to %s (UTC)", s.From.Format("2006-01-02 15:04"), s.To.Format("2006-01-02 15:04"))
	samples := fmt.Sprintf("%d hourly samples from %s", s.Samples, period)
	if s.Excluded > 0 {
		samples += fmt.Sprintf(", leaving out %d hours of missing data", s.Excluded)
	}
	if s.AccelPerInstance <= 0 {
		return []string{s.InstanceType + " has no accelerators in the cluster settings, so no guarantee in instances can be suggested."}
	}
	if !s.Enough {
		return []string{samples + fmt.Sprintf(": a suggestion needs at least %d (a week).", MinSuggestionSamples)}
	}
	out := []string{
		samples + ".",
		fmt.Sprintf("The %dth percentile (nearest rank: the %d%s smallest of %d) of accelerators held per hour, guaranteed and borrowed, is %s.",
			SuggestionPercentile, s.P95Rank, ordinal(s.P95Rank), s.Samples, FormatAccel(s.P95AccelSeconds)),
		fmt.Sprintf("At %d accelerators per %s that is %s instances, rounded up to %d.",
			s.AccelPerInstance, s.InstanceType, formatHundredths(s.P95AccelSeconds*100/(int64(s.AccelPerInstance)*3600)), s.SuggestedInstances),
	}
	switch {
	case s.SuggestedInstances > s.CurrentInstances:
		out = append(out, fmt.Sprintf("The current guarantee is %d: raising it to %d would cover 95%% of hours without borrowing.", s.CurrentInstances, s.SuggestedInstances))
	case s.SuggestedInstances < s.CurrentInstances:
		out = append(out, fmt.Sprintf("The current guarantee is %d: in 95%% of hours the team held no more than %d instances' worth; lowering it to %d frees the rest for others.", s.CurrentInstances, s.SuggestedInstances, s.SuggestedInstances))
	default:
		out = append(out, fmt.Sprintf("The current guarantee is %d: it fits.", s.CurrentInstances))
	}
	return out
}

// FormatAccel shows accelerator-seconds held in an hour as accelerators,
// to two decimals.
func FormatAccel(accelSeconds int64) string {
	return formatHundredths(accelSeconds*100/3600) + " accelerators"
}

func formatHundredths(h int64) string { return fmt.Sprintf("%d.%02d", h/100, h%100) }

func ordinal(n int) string {
	if n%100 >= 11 && n%100 <= 13 {
		return "th"
	}
	switch n % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}
