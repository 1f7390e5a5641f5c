package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// platformSource is a documentation page of a platform the portal runs on
// (AWS, Kubernetes, Slurm, Neuron), as the code cites one.
var platformSource = regexp.MustCompile(`https://(docs\.aws\.amazon\.com|kubernetes\.io|slurm\.schedmd\.com|awsdocs-neuron\.readthedocs-hosted\.com)/[A-Za-z0-9./_#?=%-]*[A-Za-z0-9/_#=%-]`)

// TestPlatformReferenceListsEverySource: docs/platform-reference.md lists
// the platform facts the code relies on with their sources, so every
// documentation page a non-test file of cmd/, internal/ or hack/ cites is
// on it. A fact cited in the code and left off the page fails here.
func TestPlatformReferenceListsEverySource(t *testing.T) {
	ref, err := os.ReadFile("../../docs/platform-reference.md")
	if err != nil {
		t.Fatal(err)
	}
	cited := map[string][]string{}
	for _, dir := range []string{"cmd", "internal", "hack"} {
		err := filepath.WalkDir(filepath.Join("../..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			ext := filepath.Ext(path)
			if strings.HasSuffix(path, "_test.go") || (ext != ".go" && ext != ".sh") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, u := range platformSource.FindAllString(string(b), -1) {
				u = strings.TrimSuffix(u, ".")
				cited[u] = append(cited[u], strings.TrimPrefix(path, "../../"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(cited) < 30 {
		t.Fatalf("found only %d cited sources: the test is not reading the code", len(cited))
	}
	var missing []string
	for u, files := range cited {
		if !strings.Contains(string(ref), u) {
			missing = append(missing, u+" (cited in "+strings.Join(files, ", ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/platform-reference.md does not list %s", m)
	}
}
