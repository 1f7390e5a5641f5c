// Package benchtable collects the figures `make bench` prints as one table:
// each figure, its baseline measured in the same run, their ratio, the
// target and whether the figure meets it.
//
// A benchmark records rows with Record; they are appended, one JSON object
// per line, to the file PORTAL_BENCH_RESULTS names (bench/run.sh sets it).
// Without it Record only logs the row, so `go test -bench` alone still shows
// the figures. bench/table reads the file and prints the table.
package benchtable

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
)

// EnvResults names the file rows are appended to.
const EnvResults = "PORTAL_BENCH_RESULTS"

// Kind says how a row's target is read.
type Kind string

const (
	// RatioAtLeast: Value/Baseline must be at least Limit (throughput next to a floor).
	RatioAtLeast Kind = "ratio>="
	// RatioAtMost: Value/Baseline must be at most Limit (time next to a floor).
	RatioAtMost Kind = "ratio<="
	// AtMost: Value itself must be at most Limit (a p99, a memory size, a count);
	// Baseline is shown for reference when there is one.
	AtMost Kind = "value<="
	// Below: Value itself must be less than Limit, strictly (docs'
	// performance targets written "< 20 ms", "< 150 MiB"); Baseline is
	// shown for reference when there is one.
	Below Kind = "value<"
)

// Row is one figure of the table.
type Row struct {
	Figure       string  `json:"figure"` // e.g. "pages/sqlite/dashboard req/s"
	Value        float64 `json:"value"`
	Unit         string  `json:"unit"`
	Baseline     float64 `json:"baseline,omitempty"`
	BaselineName string  `json:"baseline_name,omitempty"` // e.g. "bare echo", "bare SSA"
	Kind         Kind    `json:"kind"`
	Limit        float64 `json:"limit"`
}

// Ratio is Value/Baseline, or NaN without a baseline.
func (r Row) Ratio() float64 {
	if r.Baseline == 0 {
		return math.NaN()
	}
	return r.Value / r.Baseline
}

// Pass says whether the row meets its target.
func (r Row) Pass() bool {
	switch r.Kind {
	case RatioAtLeast:
		return r.Baseline > 0 && r.Ratio() >= r.Limit
	case RatioAtMost:
		return r.Baseline > 0 && r.Ratio() <= r.Limit
	case AtMost:
		return r.Value <= r.Limit
	case Below:
		return r.Value < r.Limit
	}
	return false
}

// Target is the target in words, e.g. "≥ 0.5× bare echo", "< 20 ms".
func (r Row) Target() string {
	switch r.Kind {
	case RatioAtLeast:
		return fmt.Sprintf("≥ %s× %s", num(r.Limit), r.BaselineName)
	case RatioAtMost:
		return fmt.Sprintf("≤ %s× %s", num(r.Limit), r.BaselineName)
	case AtMost:
		return fmt.Sprintf("≤ %s %s", num(r.Limit), r.Unit)
	case Below:
		return fmt.Sprintf("< %s %s", num(r.Limit), r.Unit)
	}
	return "?"
}

var mu sync.Mutex

// Logger is what Record logs through (testing.TB satisfies it).
type Logger interface {
	Logf(format string, args ...any)
}

// Record logs r through l and appends it to the results file when
// PORTAL_BENCH_RESULTS is set.
func Record(l Logger, r Row) error {
	pass := "pass"
	if !r.Pass() {
		pass = "FAIL"
	}
	if l != nil {
		l.Logf("bench row: %s = %s %s (baseline %s %s, ratio %s, target %s): %s",
			r.Figure, num(r.Value), r.Unit, num(r.Baseline), r.BaselineName, num(r.Ratio()), r.Target(), pass)
	}
	path := os.Getenv(EnvResults)
	if path == "" {
		return nil
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read parses a results file.
func Read(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// Format writes rows as a Markdown table (readable as plain text too) and
// returns how many miss their target.
func Format(w io.Writer, rows []Row) (failed int, err error) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| figure\t| value\t| baseline (same run)\t| ratio\t| target\t| result\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		base, ratio := "—", "—"
		if r.Baseline != 0 {
			base = fmt.Sprintf("%s %s %s", num(r.Baseline), r.Unit, r.BaselineName)
			ratio = num(r.Ratio()) + "×"
		}
		res := "pass"
		if !r.Pass() {
			res = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "| %s\t| %s %s\t| %s\t| %s\t| %s\t| %s\t|\n", r.Figure, num(r.Value), r.Unit, base, ratio, r.Target(), res)
	}
	return failed, tw.Flush()
}

// num prints a figure with about four significant digits.
func num(f float64) string {
	switch {
	case math.IsNaN(f):
		return "—"
	case f == math.Trunc(f) && math.Abs(f) < 1e9:
		return fmt.Sprintf("%.0f", f)
	case math.Abs(f) >= 100:
		return fmt.Sprintf("%.0f", f)
	case math.Abs(f) >= 10:
		return fmt.Sprintf("%.1f", f)
	case math.Abs(f) >= 1:
		return fmt.Sprintf("%.2f", f)
	}
	return fmt.Sprintf("%.3g", f)
}
