package provision

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsRunOneWay keeps the package's imports one way (style item 1):
// provision may import workflow, its own AWS half (awsprov, which imports
// workflow only) and its Slurm half (slurmprov, and the Slurm transport
// internal/slurm it runs through, which import neither workflow nor
// provision), never the web layer or the store. workflow itself imports
// none of them (its own rule), so direct imports suffice.
func TestImportsRunOneWay(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	aws, err := filepath.Glob("awsprov/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, aws...)
	const module = "github.com/hyperpod-governance/portal/"
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			allowed := path == module+"internal/workflow" || (!strings.HasPrefix(f, "awsprov/") &&
				(path == module+"internal/provision/awsprov" || path == module+"internal/provision/slurmprov" || path == module+"internal/slurm"))
			if strings.HasPrefix(path, module) && !allowed {
				t.Errorf("%s imports %s: provision may import internal/workflow (and its awsprov, slurmprov, internal/slurm) only", f, path)
			}
		}
	}
}
