package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExplain: the slow requests of the window (at or over the p99
// target, 20 ms: the p99 must stay under it) are grouped by the 100 ms
// they ended in, a GC line is placed by its time since the start, a new
// minute is named, other lines are listed, and nothing outside the window
// is counted.
func TestExplain(t *testing.T) {
	dir := t.TempDir()
	started := time.Date(2026, 12, 2, 16, 59, 50, 0, time.UTC)
	from := started.Add(8 * time.Second) // 16:59:58
	to := from.Add(5 * time.Second)
	at := func(d time.Duration) string { return from.Add(d).Format(time.RFC3339Nano) }
	log := strings.Join([]string{
		"time=" + at(-time.Second) + " level=INFO msg=request path=/x status=200 duration_ms=500.0", // before the window
		"time=" + at(100*time.Millisecond) + " level=INFO msg=request path=/x status=200 duration_ms=2.5",
		"time=" + at(1210*time.Millisecond) + " level=INFO msg=request path=/x status=200 duration_ms=120.5",
		"time=" + at(1250*time.Millisecond) + " level=INFO msg=request path=/x status=200 duration_ms=310.25",
		"time=" + at(3*time.Second) + " level=INFO msg=request path=/x status=200 duration_ms=45",
		"time=" + at(3*time.Second+10*time.Millisecond) + " level=INFO msg=request path=/x status=200 duration_ms=20",   // at the target: slow
		"time=" + at(3*time.Second+20*time.Millisecond) + " level=INFO msg=request path=/x status=200 duration_ms=19.9", // under it
		"time=" + at(2*time.Second) + " level=INFO msg=\"review tick\" connections=10000",
		"gc 7 @9.500s 1%: 0.10+12+0.05 ms clock, 0.2+0.1/5/0+0.1 ms cpu, 20->21->10 MB, 21 MB goal, 0 MB stacks, 0 MB globals, 2 P",
		"gc 8 @20.000s 1%: 0.10+12+0.05 ms clock, 0.2+0.1/5/0+0.1 ms cpu, 20->21->10 MB, 21 MB goal, 0 MB stacks, 0 MB globals, 2 P", // after
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, portalLog), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	explain(&out, dir, started, from, to)
	got := out.String()
	for _, want := range []string{
		"6 requests logged, 4 at or over 20 ms; 1 GCs; 1 other log lines",
		"+1.2s: 2 requests at or over 20 ms, the slowest 310.2 ms",
		"+3.0s: 2 requests at or over 20 ms, the slowest 45.0 ms",
		"gc +1.500s pauses 0.10+0.05 ms, concurrent 12.0 ms",
		"+2.000s: a new minute (17:00)",
		`+2.000s time=`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "500.0") {
		t.Errorf("a request before the window was counted:\n%s", got)
	}
}

// TestHostCPUSince: steal is the eighth figure of /proc/stat's cpu line,
// its share counted against the first eight.
func TestHostCPUSince(t *testing.T) {
	a := hostCPU{total: 10 * time.Second, steal: time.Second}
	b := hostCPU{total: 20 * time.Second, steal: 1500 * time.Millisecond}
	if got, want := a.since(b), "host steal 500ms (5.0% of CPU time)"; got != want {
		t.Errorf("since = %q, want %q", got, want)
	}
	if _, err := readHostCPU(); err != nil {
		t.Fatal(err)
	}
}
