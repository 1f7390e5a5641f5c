package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	for _, e := range []event{
		{Action: "output", Package: "m/a", Test: "TestQuiet", Output: "hidden\n"},
		{Action: "pass", Package: "m/a", Test: "TestQuiet", Elapsed: 2},
		{Action: "output", Package: "m/a", Test: "TestLoud", Output: "--- FAIL: TestLoud (5.00s)\n"},
		{Action: "pass", Package: "m/a", Test: "TestLoud/sub", Elapsed: 4},
		{Action: "fail", Package: "m/a", Test: "TestLoud", Elapsed: 5},
		{Action: "output", Package: "m/a", Output: "FAIL\tm/a\t7.0s\n"},
		{Action: "fail", Package: "m/a", Elapsed: 7},
		{Action: "output", Package: "m/b", Output: "PASS\n"},
		{Action: "output", Package: "m/b", Output: "ok  \tm/b\t1.0s\n"},
		{Action: "pass", Package: "m/b", Elapsed: 1},
	} {
		r.add(e)
	}
	if r.summary(2) {
		t.Error("a failed test and package: summary says the run passed")
	}
	got := out.String()
	for _, want := range []string{"--- FAIL: TestLoud", "FAIL\tm/a", "ok  \tm/b", "5.0s  m/a TestLoud\n", "7.0s  m/a\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PASS\n") {
		t.Errorf("a passing package's PASS line is printed (go test without -json prints only its ok line):\n%s", got)
	}
	if strings.Contains(got, "hidden") || strings.Contains(got, "TestLoud/sub") {
		t.Errorf("a passing test's output or a subtest's time is printed:\n%s", got)
	}
	// Slowest first: TestLoud (5 s) before TestQuiet (2 s).
	if i, j := strings.Index(got, "m/a TestLoud"), strings.Index(got, "m/a TestQuiet"); i < 0 || j < 0 || i > j {
		t.Errorf("tests not listed slowest first:\n%s", got)
	}
}

func TestReportUnfinishedPackageFails(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	r.add(event{Action: "run", Package: "m/c", Test: "TestHang"})
	r.add(event{Action: "output", Package: "m/c", Test: "TestHang", Output: "waiting\n"})
	if r.summary(0) {
		t.Error("a package without a result passed")
	}
	if !strings.Contains(out.String(), "m/c: no result") || !strings.Contains(out.String(), "waiting") {
		t.Errorf("the unfinished package is not reported with its output:\n%s", out.String())
	}
}

func TestReportPassingRun(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	r.add(event{Action: "pass", Package: "m/d", Test: "TestA", Elapsed: 1})
	r.add(event{Action: "pass", Package: "m/d", Elapsed: 1})
	if !r.summary(5) {
		t.Errorf("a passing run failed:\n%s", out.String())
	}
}

func TestReportShowsWhenEachPackageRan(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	t0 := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, e := range []event{
		{Time: at(0), Action: "start", Package: "m/a"},
		{Time: at(3), Action: "start", Package: "m/b"},
		{Time: at(40), Action: "pass", Package: "m/a", Elapsed: 40},
		{Time: at(93), Action: "pass", Package: "m/b", Elapsed: 90},
	} {
		r.add(e)
	}
	if !r.summary(2) {
		t.Fatalf("a passing run failed:\n%s", out.String())
	}
	for _, want := range []string{"90.0s  m/b  (3s to 93s)\n", "40.0s  m/a  (0s to 40s)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportWithoutAnyPackageFails: go test that stops before its first
// package (here, as in ci60, two packages whose test binaries -o would
// write to one file) prints only its own error; that is a failure, not an
// empty pass.
func TestReportWithoutAnyPackageFails(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	if r.summary(5) {
		t.Errorf("a run without any package's result passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "nothing was tested") {
		t.Errorf("the report does not say why it failed:\n%s", out.String())
	}
}
