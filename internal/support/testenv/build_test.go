package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModuleRoot: found from the package directory go test runs in, and
// from another directory inside it, without the compiled-in source path.
func TestModuleRoot(t *testing.T) {
	root := ModuleRoot()
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || modulePath(b) != Module {
		t.Fatalf("ModuleRoot() = %s: its go.mod declares %q (%v), want %s", root, modulePath(b), err, Module)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "support", "testenv", "build.go")); err != nil {
		t.Fatalf("ModuleRoot() = %s is not this repository's root: %v", root, err)
	}
	t.Chdir(filepath.Join(root, "internal"))
	if got := ModuleRoot(); got != root {
		t.Errorf("from internal/: ModuleRoot() = %s, want %s", got, root)
	}
}
