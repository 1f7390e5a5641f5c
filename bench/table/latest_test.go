package main

import (
	"os"
	"strings"
	"testing"
)

// TestDocsShowLatestTable: docs/benchmarks.md's "Latest table" section shows
// bench/latest.md as make bench wrote it (machine line, table and verdict),
// so the two cannot drift. After make bench, paste bench/latest.md into
// that section.
func TestDocsShowLatestTable(t *testing.T) {
	latest, err := os.ReadFile("../latest.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	table := strings.TrimSpace(string(latest))
	if strings.Contains(table, "with local changes") {
		t.Errorf("bench/latest.md was measured on a dirty checkout (%q); the table shown must come from a commit",
			strings.SplitN(table, "\n", 2)[0])
	}
	_, section, ok := strings.Cut(string(readme), "\n## Latest table\n")
	if !ok {
		t.Fatal(`docs/benchmarks.md has no "## Latest table" section`)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	if !strings.Contains(section, table) {
		t.Errorf("docs/benchmarks.md's Latest table section does not contain bench/latest.md verbatim (%q); paste the file into it",
			strings.SplitN(table, "\n", 2)[0])
	}
}
