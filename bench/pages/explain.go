package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A stalled run (p99 at or over the target, which it must stay under) is
// explained from the portal's own log: its request lines (time and
// duration_ms, internal/web's request log), the other lines it wrote
// meanwhile (a leader's loop, a scheduler tick) and the Go runtime's GC
// lines (the portal runs with GODEBUG=gctrace=1, so each collection writes
// one line to stderr, its time counted from the process's start). What it
// prints is for reading, not recorded in the table.

// slowMs is a request the explainer lists: at or over the p99 target
// (which the p99 must stay under).
const slowMs = float64(p99Target)

var (
	reLogTime = regexp.MustCompile(`^time=(\S+) `)
	reLogMsg  = regexp.MustCompile(` msg=(\S+)`)
	reLogDur  = regexp.MustCompile(` duration_ms=([0-9.]+)`)
	reLogPath = regexp.MustCompile(` path=(\S+)`)
	// gctrace (runtime package docs): "gc # @#s #%: #+#+# ms clock, ..."
	reGC = regexp.MustCompile(`^gc \d+ @([0-9.]+)s \d+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)
)

type logRequest struct {
	end  time.Time // the line's time: when the request was answered
	ms   float64
	path string
}

// explain writes to w what the portal whose directory is dir, started
// at about started, logged between from and to.
func explain(w io.Writer, dir string, started, from, to time.Time) {
	f, err := os.Open(filepath.Join(dir, portalLog))
	if err != nil {
		fmt.Fprintf(w, "    explain: %v\n", err)
		return
	}
	defer f.Close()
	var reqs []logRequest
	var other, gcs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reGC.FindStringSubmatch(line); m != nil {
			secs, _ := strconv.ParseFloat(m[1], 64)
			at := started.Add(time.Duration(secs * float64(time.Second)))
			if at.Before(from) || at.After(to) {
				continue
			}
			stw1, _ := strconv.ParseFloat(m[2], 64)
			conc, _ := strconv.ParseFloat(m[3], 64)
			stw2, _ := strconv.ParseFloat(m[4], 64)
			gcs = append(gcs, fmt.Sprintf("+%.3fs pauses %.2f+%.2f ms, concurrent %.1f ms", at.Sub(from).Seconds(), stw1, stw2, conc))
			continue
		}
		m := reLogTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		if msg := reLogMsg.FindStringSubmatch(line); msg != nil && msg[1] == "request" {
			d := reLogDur.FindStringSubmatch(line)
			p := reLogPath.FindStringSubmatch(line)
			if d == nil || p == nil {
				continue
			}
			ms, _ := strconv.ParseFloat(d[1], 64)
			reqs = append(reqs, logRequest{end: at, ms: ms, path: p[1]})
			continue
		}
		other = append(other, fmt.Sprintf("+%.3fs %s", at.Sub(from).Seconds(), line))
	}
	var slow []logRequest
	for _, r := range reqs {
		if r.ms >= slowMs {
			slow = append(slow, r)
		}
	}
	fmt.Fprintf(w, "    explain (%s, %s to %s): %d requests logged, %d at or over %.0f ms; %d GCs; %d other log lines\n",
		dir, from.Format("15:04:05.000"), to.Format("15:04:05.000"), len(reqs), len(slow), slowMs, len(gcs), len(other))
	// The slow requests grouped by the 100 ms in which they ended: a
	// stall of every connection at once is one group of about wrk -c.
	groups := map[int64][]logRequest{}
	for _, r := range slow {
		k := r.end.Sub(from).Milliseconds() / 100
		groups[k] = append(groups[k], r)
	}
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		g := groups[k]
		worst := g[0]
		for _, r := range g {
			if r.ms > worst.ms {
				worst = r
			}
		}
		fmt.Fprintf(w, "      +%.1fs: %d requests at or over %.0f ms, the slowest %.1f ms\n", float64(k)/10, len(g), slowMs, worst.ms)
	}
	// The page cache keys on the minute (internal/web's pageCache): at
	// each minute's start every page is rendered afresh.
	for m := from.Truncate(time.Minute).Add(time.Minute); m.Before(to); m = m.Add(time.Minute) {
		fmt.Fprintf(w, "      +%.3fs: a new minute (%s)\n", m.Sub(from).Seconds(), m.Format("15:04"))
	}
	for _, l := range gcs {
		fmt.Fprintf(w, "      gc %s\n", l)
	}
	for i, l := range other {
		if i == 20 {
			fmt.Fprintf(w, "      … %d more\n", len(other)-i)
			break
		}
		fmt.Fprintf(w, "      %s\n", strings.TrimSpace(l))
	}
}

// hostCPU is the machine's CPU time from /proc/stat's first line (proc(5):
// user nice system idle iowait irq softirq steal …, in USER_HZ, 1/100 s):
// all of it, and the steal, time a virtual machine's CPUs were ready to
// run but the hypervisor ran something else. Steal during a run is a
// stall no code of the portal's can cause or avoid.
type hostCPU struct{ total, steal time.Duration }

func readHostCPU() (hostCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}, fmt.Errorf("/proc/stat: %q", line)
	}
	var c hostCPU
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return hostCPU{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		d := time.Duration(n) * 10 * time.Millisecond
		if i < 8 { // guest times (fields 9, 10) are already in user and nice
			c.total += d
		}
		if i == 7 {
			c.steal = d
		}
	}
	return c, nil
}

// since is the CPU time and steal between c and a later reading.
func (c hostCPU) since(later hostCPU) string {
	total, steal := later.total-c.total, later.steal-c.steal
	if total <= 0 {
		return "host steal n/a"
	}
	return fmt.Sprintf("host steal %s (%.1f%% of CPU time)", steal, 100*float64(steal)/float64(total))
}

// cacheViews is the portal's portal_page_cache_views_total by result
// (internal/web's page cache) read from its /metrics.
type cacheViews map[string]float64

var reCacheViews = regexp.MustCompile(`(?m)^portal_page_cache_views_total\{result="(\w+)"\} ([0-9.e+]+)$`)

func readCacheViews(base string) (cacheViews, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	v := cacheViews{}
	for _, m := range reCacheViews.FindAllStringSubmatch(string(b), -1) {
		v[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return v, nil
}

// since is the views served between v and a later reading.
func (v cacheViews) since(later cacheViews) string {
	return fmt.Sprintf("page cache: %.0f rendered, %.0f shared a render, %.0f the last minute's while it rendered, %.0f hits, %.0f rendered without a data version (a write in progress)",
		later["rendered"]-v["rendered"], later["shared"]-v["shared"], later["stale"]-v["stale"], later["hit"]-v["hit"], later["unversioned"]-v["unversioned"])
}
