package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what the page benchmark reads from wrk's report (wrk 4.1.0
// with --latency, Debian's package). wrk corrects its latency figures for
// coordinated omission before it prints them: wrk.c calls
// stats_correct(statistics.latency, interval), interval being the run's
// length over the requests per connection, which adds for each recorded
// latency above interval the samples the stalled connection would have
// sent meanwhile. So Mean and P99 are not what Little's law gives from
// RPS: a stall of every connection at once weighs as much as the requests
// it held up would have, and a few tens of milliseconds of one show in the
// p99.
type wrkResult struct {
	RPS      float64       // "Requests/sec:"
	Mean     time.Duration // the Latency line's Avg
	P99      time.Duration // "99%" of the Latency Distribution
	Requests int64         // "N requests in ..."
	Non2xx   int64         // "Non-2xx or 3xx responses: N"
	Errors   string        // "Socket errors: ..." as printed, "" when none
}

var (
	reRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)\s*$`)
	reMean     = regexp.MustCompile(`(?m)^\s+Latency\s+([0-9.]+(?:us|ms|s|m|h))\s`)
	reP99      = regexp.MustCompile(`(?m)^\s+99(?:\.000)?%\s+([0-9.]+(?:us|ms|s|m|h))\s*$`)
	reRequests = regexp.MustCompile(`(?m)^\s+([0-9]+) requests in `)
	reNon2xx   = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses:\s+([0-9]+)\s*$`)
	reErrors   = regexp.MustCompile(`(?m)^\s+Socket errors:\s*(.*)$`)
	reDuration = regexp.MustCompile(`^([0-9.]+)(us|ms|s|m|h)$`)
)

// parseWrk reads wrk's report. Every figure the benchmark records must be
// there: a report without them is an error, never a zero.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk: no Requests/sec in its output:\n%s", out)
	}
	var err error
	if r.RPS, err = strconv.ParseFloat(m[1], 64); err != nil {
		return r, fmt.Errorf("wrk: Requests/sec %q: %w", m[1], err)
	}
	if m = reMean.FindStringSubmatch(out); m == nil {
		return r, fmt.Errorf("wrk: no Latency line in its output:\n%s", out)
	}
	if r.Mean, err = parseWrkDuration(m[1]); err != nil {
		return r, err
	}
	if m = reP99.FindStringSubmatch(out); m == nil {
		return r, fmt.Errorf("wrk: no 99%% latency in its output (run it with --latency):\n%s", out)
	}
	if r.P99, err = parseWrkDuration(m[1]); err != nil {
		return r, err
	}
	if m = reRequests.FindStringSubmatch(out); m == nil {
		return r, fmt.Errorf("wrk: no request count in its output:\n%s", out)
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	if m = reNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = reErrors.FindStringSubmatch(out); m != nil {
		r.Errors = strings.TrimSpace(m[1])
	}
	return r, nil
}

// parseWrkDuration reads a duration as wrk prints it: a number with us, ms,
// s, m or h (wrk's units.c), e.g. "850.00us", "12.34ms", "1.02s".
func parseWrkDuration(s string) (time.Duration, error) {
	m := reDuration.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("wrk: %q is not a duration", s)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("wrk: %q: %w", s, err)
	}
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return time.Duration(f * float64(unit)), nil
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
