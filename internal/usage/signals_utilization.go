package usage

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// UtilizationSeries is what the utilization signal reads besides the
// team's rows: per namespace, its hourly Points over the signal's window,
// as a Utilization source returns them (one step per hour, At on the hour).
type UtilizationSeries struct {
	// Configured is false when the portal has no source (no
	// --prometheus-url): the signal says so and never fires.
	Configured bool
	// Err is the source's failure (Prometheus unreachable): no judgement.
	Err    error
	Points map[string][]Point
}

// floorRE is a floor stated in words: "below 40%", "under 30 %",
// "less than 25%", "< 30%". Whole percentages only: "below 30.5%" states
// none (conservative: a figure the portal might misread is not used).
var floorRE = regexp.MustCompile(`(?i)(?:\bbelow|\bunder|\bless than|<)\s*(\d{1,3})\s*%`)

// ContractFloor is the utilization floor the contract states: the first of
// its watched signals whose name is about utilization ("utilization" or
// "utilisation") and whose name, else response, states exactly one floor
// percentage between 1 and 100 (floorRE). sig is that signal. ok is false
// when no signal states one, or a text states two different ones.
func ContractFloor(c workflow.Contract) (floor int, sig workflow.Signal, ok bool) {
	for _, s := range c.Signals {
		name := strings.ToLower(s.Name)
		if !slices.ContainsFunc(keywords[SignalUtilization], func(w string) bool { return strings.Contains(name, w) }) {
			continue
		}
		for _, text := range []string{s.Name, s.Response} {
			if f, found, clear := statedFloor(text); found {
				return f, s, clear
			}
		}
	}
	return 0, workflow.Signal{}, false
}

// statedFloor: found when text states any floor; clear when all it states
// are one and the same percentage in 1..100.
func statedFloor(text string) (floor int, found, clear bool) {
	ms := floorRE.FindAllStringSubmatch(text, -1)
	if len(ms) == 0 {
		return 0, false, false
	}
	for i, m := range ms {
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 1 || v > 100 || i > 0 && v != floor {
			return 0, true, false
		}
		floor = v
	}
	return floor, true, true
}

// EvaluateUtilization is the team's utilization signal at now: the mean
// utilization of its GPUs over the last th.UtilizationDays whole hours,
// weighted by the accelerator-seconds each namespace held in each hour
// (its rows), against the floor (the contract's, else th's). An hour of a
// namespace with no Point is not counted (neither as zero nor in the
// weights); fewer than half the held accelerator-hours with a Point is no
// judgement. The mean exactly at the floor does not fire.
func EvaluateUtilization(c workflow.Contract, rows []Hour, u UtilizationSeries, now time.Time, th Thresholds) SignalStatus {
	end := HourStart(now)
	from := end.Add(-time.Duration(th.UtilizationDays) * 24 * time.Hour)
	floor := th.UtilizationFloorPercent
	s := SignalStatus{Kind: SignalUtilization, Team: c.Team,
		Intent: fmt.Sprintf("no floor stated in the contract's signals: the platform's default of %d%%", floor)}
	if f, sig, ok := ContractFloor(c); ok {
		floor = f
		s.Intent = fmt.Sprintf("the contract's signal %q states a floor of %d%%: %q", sig.Name, f, strings.TrimSpace(sig.Name+": "+sig.Response))
	}
	s.Threshold = fmt.Sprintf("fires when the team's GPUs were on average less than %d%% busy over %d days (DCGM_FI_DEV_GPU_UTIL, weighted by the accelerator-hours each namespace held each hour)", floor, th.UtilizationDays)
	s.Owner, s.Response = ownerOf(c, SignalUtilization)

	held := map[string]map[time.Time]int64{}
	var total int64
	for _, h := range rows {
		at := HourStart(h.Start)
		if at.Before(from) || !at.Before(end) || h.AccelSeconds() <= 0 {
			continue
		}
		if held[h.Namespace] == nil {
			held[h.Namespace] = map[time.Time]int64{}
		}
		held[h.Namespace][at] += h.AccelSeconds()
		total += h.AccelSeconds()
	}
	var weighted float64 // Σ accelerator-seconds × percent
	var measured int64   // Σ accelerator-seconds with a point
	for ns, points := range u.Points {
		seen := map[time.Time]bool{}
		for _, p := range points {
			at := HourStart(p.At)
			if seen[at] {
				continue // one point per hour; a repeat is not counted twice
			}
			seen[at] = true
			if a := held[ns][at]; a > 0 {
				weighted += float64(a) * p.Percent
				measured += a
			}
		}
	}
	days := th.UtilizationDays
	switch {
	case !u.Configured:
		s.State, s.Current = SignalNoData, "needs --prometheus-url: utilization (how busy the allocated GPUs were) is read from Prometheus"
	case u.Err != nil:
		s.State, s.Current = SignalNoData, "utilization could not be read from Prometheus: "+u.Err.Error()
	case total == 0:
		s.State, s.Current = SignalNoData, fmt.Sprintf("the team held no accelerator in the last %d days", days)
	case measured*2 < total:
		s.State, s.Current = SignalNoData, fmt.Sprintf("utilization was reported for only %s of the %s accelerator-hours held in the last %d days", hours(measured), hours(total), days)
	default:
		mean := weighted / float64(measured)
		s.Current = fmt.Sprintf("mean utilization %.1f%% over %s accelerator-hours with a reading (of %s held)", mean, hours(measured), hours(total))
		s.State = SignalOK
		if weighted < float64(floor)*float64(measured) {
			s.State = SignalFiring
		}
	}
	return s
}
