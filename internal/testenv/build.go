package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ModuleRoot is the repository's root directory (where go.mod is).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// GoBuild builds the package pkg (a path relative to the module root, e.g.
// "./cmd/portal") into out as `make build` does: static (CGO_ENABLED=0) and
// -trimpath, with ldflags. The tests that run the real binary (e2e, the
// image, the two-replica harness) all build this way, so the Go build cache
// compiles the portal's packages once for all of them and each build only
// links.
func GoBuild(out, pkg, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = ModuleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// MustGoBuild is GoBuild failing t on error.
func MustGoBuild(t testing.TB, out, pkg, ldflags string) {
	t.Helper()
	if err := GoBuild(out, pkg, ldflags); err != nil {
		t.Fatal(err)
	}
}
