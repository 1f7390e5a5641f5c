package web

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWebDoesNotImportAWSProvisioning keeps the AWS side of provisioning
// behind internal/provision (issue 11): handlers parse, authorize, call and
// render; the plan's AWS preview, the quota adoption and the scheduler
// config reconcile are provision's (AWSPreviewer, QuotaAdopter, scheduler
// jobs), wired from awsprov by cmd/portal. provision itself imports awsprov,
// so this checks the package's own imports, not its dependencies. Tests
// may use awsprov's test endpoints.
func TestWebDoesNotImportAWSProvisioning(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files (%v)", err)
	}
	const forbidden = "github.com/hyperpod-governance/portal/internal/provision/awsprov"
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
			if path == forbidden || strings.HasPrefix(path, forbidden+"/") {
				t.Errorf("%s imports %s: go through internal/provision", f, path)
			}
		}
	}
}
