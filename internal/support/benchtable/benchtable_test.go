package benchtable

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPass(t *testing.T) {
	for _, c := range []struct {
		r    Row
		want bool
	}{
		{Row{Value: 30, Baseline: 100, Kind: RatioAtLeast, Limit: 0.25}, true},
		{Row{Value: 20, Baseline: 100, Kind: RatioAtLeast, Limit: 0.25}, false},
		{Row{Value: 20, Kind: RatioAtLeast, Limit: 0.25}, false}, // no baseline: cannot pass
		{Row{Value: 5, Baseline: 2, Kind: RatioAtMost, Limit: 3}, true},
		{Row{Value: 7, Baseline: 2, Kind: RatioAtMost, Limit: 3}, false},
		{Row{Value: 29.9, Kind: AtMost, Limit: 30}, true},
		{Row{Value: 30.1, Kind: AtMost, Limit: 30}, false},
		{Row{Value: 30, Kind: AtMost, Limit: 30}, true},
		{Row{Value: 19.9, Kind: Below, Limit: 20}, true},
		{Row{Value: 20, Kind: Below, Limit: 20}, false}, // strictly less
		{Row{Value: 20.1, Kind: Below, Limit: 20}, false},
		{Row{Value: 1, Kind: "unknown", Limit: 30}, false},
	} {
		if got := c.r.Pass(); got != c.want {
			t.Errorf("%+v: Pass() = %v, want %v", c.r, got, c.want)
		}
	}
}

func TestRecordReadFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	t.Setenv(EnvResults, path)
	rows := []Row{
		{Figure: "pages/sqlite/list req/s", Value: 3000, Unit: "req/s", Baseline: 10000, BaselineName: "bare echo", Kind: RatioAtLeast, Limit: 0.25},
		{Figure: "pages/sqlite/list p99", Value: 41, Unit: "ms", Kind: AtMost, Limit: 30},
		{Figure: "usage/sqlite flush", Value: 12, Unit: "ms", Kind: Below, Limit: 1000},
	}
	for _, r := range rows {
		if err := Record(t, r); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Read(f)
	if err != nil || len(got) != len(rows) || got[0] != rows[0] || got[1] != rows[1] || got[2] != rows[2] {
		t.Fatalf("Read = %+v, %v; want the recorded rows", got, err)
	}
	var out bytes.Buffer
	failed, err := Format(&out, got)
	if err != nil || failed != 1 {
		t.Fatalf("Format: failed = %d, %v; want 1 (the p99 over its limit)", failed, err)
	}
	for _, want := range []string{"0.3×", "≥ 0.25× bare echo", "| pass", "≤ 30 ms", "| FAIL", "< 1000 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
