package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestREADMEMapNamesEveryPackage: the README is the map, so its
// "Architecture" section names every internal package (the sketch, or the
// list of support code beneath it). A package added without a place on the
// map fails here.
func TestREADMEMapNamesEveryPackage(t *testing.T) {
	const mod = "github.com/hyperpod-governance/portal/"
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Architecture\n")
	if !ok {
		t.Fatal(`README.md has no "## Architecture" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out, err := exec.Command("go", "list", "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	named := 0
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(pkg, mod)
		if !strings.HasPrefix(rel, "internal/") {
			continue
		}
		named++
		// A package is named when its path appears followed by something
		// other than more path (internal/usage must not count as named
		// because internal/usage/prom is).
		found := false
		for rest := section; ; {
			i := strings.Index(rest, rel)
			if i < 0 {
				break
			}
			rest = rest[i+len(rel):]
			if !strings.HasPrefix(rest, "/") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("README.md's Architecture section does not name %s", rel)
		}
	}
	if named < 10 {
		t.Fatalf("go list found only %d internal packages; the test is not looking at the module", named)
	}
}
