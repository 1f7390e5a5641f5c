package usage

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Money is computed in one place (issue 33): outside this package, no
// product code charges an input of its own (Charge) or reads one
// (CostInputSummed, CostInput) to price it; the finance page, statements,
// exports and review evidence all go through CostsOf. The store defines
// the readers; tests may call them to build oracles.
func TestMoneyIsComputedOnlyByCostsOf(t *testing.T) {
	root := filepath.Join("..", "..")
	forbidden := []string{"usage.Charge(", ".CostInputSummed(", ".CostInput("}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") ||
			(strings.HasPrefix(rel, "internal/usage/") && !strings.Contains(strings.TrimPrefix(rel, "internal/usage/"), "/")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range forbidden {
			if strings.Contains(string(b), f) {
				t.Errorf("%s calls %s: money is computed by usage.CostsOf only", rel, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
