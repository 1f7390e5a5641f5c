package views

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxGeneratedLines caps each generated component function (issue 33): a
// page whose generated function grows past it is split into named section
// components (`templ xxxSection(...)`, called with `@xxxSection(...)`), one
// file per page or small group of pages.
const maxGeneratedLines = 600

func TestNoGeneratedComponentIsOverTheCap(t *testing.T) {
	files, err := filepath.Glob("*_templ.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated files found (%v)", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line
			if lines > maxGeneratedLines {
				t.Errorf("%s: %s generates %d lines (cap %d): split the component into section components", name, fn.Name.Name, lines, maxGeneratedLines)
			}
		}
	}
}
