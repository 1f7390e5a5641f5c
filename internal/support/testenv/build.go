package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ModuleRoot is the repository's root directory: the nearest directory at
// or above the working directory whose go.mod declares this module. go test
// runs each package's tests in the package's directory, so this holds for
// every test; it does not use the source file's compiled-in path, which
// `go test -trimpath` (make test) removes so that test packages compiled in
// one checkout are reused from the build cache by another.
func ModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic("testenv.ModuleRoot: " + err.Error())
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == Module {
			return d
		}
		if filepath.Dir(d) == d {
			panic("testenv.ModuleRoot: no go.mod of " + Module + " at or above " + dir)
		}
	}
}

// Module is the portal's module path.
const Module = "github.com/hyperpod-governance/portal"

// modulePath is the path of go.mod's module line.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// BinPath is where a test builds the binary it names: in the directory
// PORTAL_TEST_BIN_DIR names when it is set (make test sets it to a
// directory in the user's cache, kept between runs, as it keeps the test
// binaries: go build finds a binary there up to date, by the build ID it
// carries, and does not link it again; a warm make test linked the portal
// four times otherwise), else in dir. Each caller names its own binary, so
// that packages testing side by side never write one file.
func BinPath(name, dir string) string {
	if d := os.Getenv("PORTAL_TEST_BIN_DIR"); d != "" {
		return filepath.Join(d, name)
	}
	return filepath.Join(dir, name)
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
