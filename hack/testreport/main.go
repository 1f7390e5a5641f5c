// Command testreport reads `go test -json` on its standard input and prints
// what `go test` without -json prints (each package's ok/FAIL line, the
// output of failed tests and of package-level code), then the slowest tests
// and packages of the run, each package with when it started and ended
// (seconds after the run's first package started: which packages overlap,
// and which one ended the run). make test pipes its go test through it, so that
// every run says where its minutes went (issue 34: a warm make test is to
// stay under 10 minutes). It exits 1 when a test or a package failed, when the
// input ended without a package's result (a killed go test), or when it held
// no package's result at all (go test refused to start).
//
//	go test -json ./... | go run ./hack/testreport -top 15
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type key struct{ pkg, test string }

type timing struct {
	name    string
	elapsed time.Duration
	// span: a package's first and last event (zero for tests, and for
	// input without times)
	from, to time.Time
}

// report holds a run's state: output kept until a test's result decides
// whether it is printed, and the times of what ended.
type report struct {
	out      io.Writer
	held     map[key][]string
	started  map[string]bool      // packages with output or tests seen
	first    map[string]time.Time // each package's first event
	origin   time.Time            // the run's first event
	ended    map[string]bool      // packages with a pass, fail or skip result
	tests    []timing
	packages []timing
	failed   bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, held: map[key][]string{}, started: map[string]bool{}, ended: map[string]bool{}, first: map[string]time.Time{}}
}

// add takes one event. Output of a test is held until its result: printed
// when it failed, dropped when it passed or was skipped (as go test without
// -v does). A package's own output (its ok/FAIL line, TestMain's logs, build
// errors) is printed as it comes.
func (r *report) add(e event) {
	if e.Package != "" {
		r.started[e.Package] = true
		if _, seen := r.first[e.Package]; !seen && !e.Time.IsZero() {
			r.first[e.Package] = e.Time
		}
	}
	if r.origin.IsZero() || (!e.Time.IsZero() && e.Time.Before(r.origin)) {
		r.origin = e.Time
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output": // a package's compile errors (Go 1.24's -json)
		fmt.Fprint(r.out, e.Output)
	case "build-fail":
		r.failed = true
	case "output":
		if e.Test == "" {
			if e.Output != "PASS\n" { // the test binary's own last line, which go test without -json does not print
				fmt.Fprint(r.out, e.Output)
			}
			return
		}
		r.held[k] = append(r.held[k], e.Output)
	case "pass", "skip", "fail":
		d := time.Duration(e.Elapsed * float64(time.Second))
		if e.Test == "" {
			r.ended[e.Package] = true
			if e.Action == "fail" {
				r.failed = true
			}
			r.packages = append(r.packages, timing{name: e.Package, elapsed: d, from: r.first[e.Package], to: e.Time})
			return
		}
		if e.Action == "fail" {
			r.failed = true
			for _, line := range r.held[k] {
				fmt.Fprint(r.out, line)
			}
		}
		delete(r.held, k)
		if !strings.Contains(e.Test, "/") { // top-level tests only: subtests are inside them
			r.tests = append(r.tests, timing{name: e.Package + " " + e.Test, elapsed: d})
		}
	}
}

// summary prints the top slowest tests and packages, and says whether
// the run passed. A run without any package's result fails: go test
// stopped before its first package (an error of its own, such as two test
// binaries -o would write to one file, printed above), and nothing was
// tested.
func (r *report) summary(top int) bool {
	if len(r.ended) == 0 && len(r.started) == 0 {
		fmt.Fprintln(r.out, "testreport: no package's result in go test's output: nothing was tested")
		return false
	}
	var unfinished []string
	for p := range r.started {
		if !r.ended[p] {
			unfinished = append(unfinished, p)
		}
	}
	sort.Strings(unfinished)
	for _, p := range unfinished {
		fmt.Fprintf(r.out, "testreport: %s: no result (go test stopped before it ended)\n", p)
		// What it printed before it stopped is the only clue left.
		for k, lines := range r.held {
			if k.pkg == p {
				fmt.Fprintf(r.out, "--- %s (unfinished) output:\n%s", k.test, strings.Join(lines, ""))
			}
		}
	}
	if top > 0 {
		for _, list := range []struct {
			what string
			ts   []timing
		}{{"tests", r.tests}, {"packages", r.packages}} {
			sort.SliceStable(list.ts, func(i, j int) bool { return list.ts[i].elapsed > list.ts[j].elapsed })
			n := min(top, len(list.ts))
			fmt.Fprintf(r.out, "slowest %d %s:\n", n, list.what)
			for _, t := range list.ts[:n] {
				span := ""
				if !t.from.IsZero() && !t.to.IsZero() && !r.origin.IsZero() {
					span = fmt.Sprintf("  (%.0fs to %.0fs)", t.from.Sub(r.origin).Seconds(), t.to.Sub(r.origin).Seconds())
				}
				fmt.Fprintf(r.out, "  %7.1fs  %s%s\n", t.elapsed.Seconds(), strings.TrimPrefix(t.name, "github.com/hyperpod-governance/portal/"), span)
			}
		}
	}
	return !r.failed && len(unfinished) == 0
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest tests and packages to list (0: none)")
	flag.Parse()
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: go test's own messages (a build failure of a
			// package without tests, vet's output) pass through.
			fmt.Fprintln(os.Stdout, string(line))
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if !r.summary(*top) {
		os.Exit(1)
	}
}
