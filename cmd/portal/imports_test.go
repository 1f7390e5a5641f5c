package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundaries enforces the one-way imports that each package's
// doc.go promises, using the go command's own view of the dependency graph.
func TestImportBoundaries(t *testing.T) {
	const mod = "github.com/hyperpod-governance/portal/"
	rules := map[string][]string{
		"internal/workflow": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/provision",
			mod + "internal/auth", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2", "database/sql", "net/http"},
		"internal/views": {mod + "internal/web", mod + "internal/store", mod + "internal/provision", mod + "internal/auth"},
		// The store keeps rows; the collector that produces them sits above it.
		"internal/store": {mod + "internal/web", mod + "internal/views", mod + "internal/provision", mod + "internal/collect",
			"github.com/labstack/echo", "k8s.io/client-go"},
		"internal/auth":      {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/provision"},
		"internal/devidp":    {mod + "internal/web", mod + "internal/views", mod + "internal/workflow", mod + "internal/provision"},
		"internal/provision": {mod + "internal/web", mod + "internal/views"},
		// Metering and money are pure: the collector and the store use them.
		"internal/usage": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/provision",
			mod + "internal/auth", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2", "database/sql", "net/http"},
		// The Prometheus reader: HTTP and the SigV4 signer; no web, store, provisioning or auth.
		"internal/usage/prom": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/provision",
			mod + "internal/auth", "github.com/labstack/echo", "k8s.io/client-go"},
		// Nothing in the usage domain, a subpackage included, reaches the
		// store or the collector: the store imports usage, so a usage
		// package that wrote through the store would be an arrow back up
		// (issue 33: the collector lived in internal/usage/collect).
		"internal/usage/...": {mod + "internal/store", mod + "internal/collect", mod + "internal/web", mod + "internal/views",
			mod + "internal/auth", "github.com/labstack/echo", "k8s.io/client-go"},
		// The collector writes through the store, above both store and
		// usage; it serves no pages.
		"internal/collect": {mod + "internal/web", mod + "internal/views", mod + "internal/auth", "github.com/labstack/echo"},
		// The Slurm usage reader: sacct through internal/slurm, rows through
		// the store, figures by internal/usage; no cluster client, pages or
		// cloud SDK.
		"internal/collect/slurmusage": {mod + "internal/web", mod + "internal/views", mod + "internal/auth", mod + "internal/provision",
			mod + "internal/collect", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2"},
		"internal/provision/awsprov": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/auth",
			mod + "internal/provision", "k8s.io/client-go"},
		// The evidence bundle is pure: its verifier runs offline, with no
		// database, network, cluster or cloud.
		"internal/evidence": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/provision",
			mod + "internal/auth", mod + "internal/usage", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2", "database/sql", "net/http"},
		// The installation's signing key is crypto only: the store keeps
		// its row and the web layer loads it.
		"internal/signing": {mod + "internal/", "database/sql", "net/http", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2"},
		// The review scheduler decides through workflow and writes through
		// the store; it serves no pages and calls no cloud API itself.
		"internal/review": {mod + "internal/web", mod + "internal/views", mod + "internal/provision", "github.com/labstack/echo",
			"k8s.io/client-go", "github.com/aws/aws-sdk-go-v2", "net/http"},
		// The binary never carries the test endpoints, nor the image builder,
		// nor the benchmark's seeding (it writes around the workflow).
		"cmd/portal": {mod + "internal/support/awstest", mod + "internal/support/testenv",
			mod + "internal/support/image", "github.com/google/go-containerregistry", mod + "internal/support/benchseed"},
		"internal/support/testenv": {mod + "internal/"},
		// The HTTP layer renders and authorizes; the background loops,
		// the identity provider and the test support are wired by
		// cmd/portal, never imported by it.
		"internal/web": {mod + "internal/support", mod + "internal/collect", mod + "internal/review", mod + "internal/notify",
			mod + "internal/leader", mod + "internal/devidp"},
		// Delivery reads the outbox through the store; it provisions,
		// collects, schedules and serves nothing.
		"internal/notify": {mod + "internal/web", mod + "internal/views", mod + "internal/provision", mod + "internal/collect",
			mod + "internal/review", mod + "internal/leader", mod + "internal/support", "github.com/labstack/echo", "k8s.io/client-go"},
		// The election runs the singletons it is given: it knows none of them.
		"internal/leader": {mod + "internal/web", mod + "internal/views", mod + "internal/provision", mod + "internal/collect",
			mod + "internal/review", mod + "internal/notify", mod + "internal/auth", mod + "internal/support", "github.com/labstack/echo"},
		// Slurm's commands and their output: no portal package at all.
		"internal/slurm": {mod + "internal/", "database/sql", "net/http", "github.com/labstack/echo", "k8s.io/client-go"},
		// The AWS transport to a HyperPod Slurm controller: Slurm's commands
		// over Session Manager (the SSM and SageMaker clients, a WebSocket);
		// no portal package but internal/slurm, no store, pages or cluster.
		"internal/slurm/slurmssm": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/auth",
			mod + "internal/provision", mod + "internal/workflow", mod + "internal/collect", mod + "internal/support",
			"github.com/labstack/echo", "k8s.io/client-go", "database/sql"},
		// A Slurm team's accounting, through internal/slurm only: no
		// store, pages, cluster client or cloud SDK.
		"internal/provision/slurmprov": {mod + "internal/web", mod + "internal/views", mod + "internal/store", mod + "internal/auth",
			mod + "internal/collect", mod + "internal/provision/awsprov", "github.com/labstack/echo", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2", "database/sql"},
		// The SDK's HTTP client: no portal package at all.
		"internal/provision/awsprov/sdkhttp": {mod + "internal/"},
		"migrations":                         {mod},
		"static":                             {mod},
	}
	// Every product package has a rule (the support packages have theirs
	// in TestProductNeverImportsSupport): a new package states its place.
	deps := moduleDeps(t)
	for rel := range deps {
		if !strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "internal/support/") {
			continue
		}
		covered := false
		for pattern := range rules {
			if rel == pattern || strings.HasSuffix(pattern, "/...") && strings.HasPrefix(rel+"/", strings.TrimSuffix(pattern, "...")) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s has no import rule: add what it must not depend on to TestImportBoundaries", rel)
		}
	}
	for pattern, forbidden := range rules {
		for _, pkg := range packagesOf(t, deps, pattern) {
			for _, dep := range deps[pkg] {
				for _, f := range forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
						t.Errorf("%s depends on %s, which its doc.go forbids (rule %s)", pkg, dep, pattern)
					}
				}
			}
		}
	}
}

// moduleDeps is every package of the module (relative to its root) with
// everything it depends on, directly or not: one go list for all the
// rules (a go list per rule took 43 s of CPU in make test).
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	const mod = "github.com/hyperpod-governance/portal"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Deps " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, list, _ := strings.Cut(line, ": ")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if rel == "" || rel == pkg {
			t.Fatalf("go list named %q, outside the module", pkg)
		}
		deps[rel] = strings.Fields(list)
	}
	if len(deps) < 20 {
		t.Fatalf("go list found only %d packages", len(deps))
	}
	return deps
}

// packagesOf is the rule's package, or with a trailing "/..." every
// package at and below it (relative to the module root).
func packagesOf(t *testing.T, deps map[string][]string, pattern string) []string {
	t.Helper()
	base, tree := strings.CutSuffix(pattern, "/...")
	var pkgs []string
	for rel := range deps {
		if rel == base || tree && strings.HasPrefix(rel, base+"/") {
			pkgs = append(pkgs, rel)
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("rule %s names no package of the module", pattern)
	}
	if tree && len(pkgs) < 2 {
		t.Fatalf("%s matched %v: the rule checks nothing below the package", pattern, pkgs)
	}
	return pkgs
}

// TestDirectImports enforces the doc.go promises about a package's own
// imports where its dependencies may still reach the package: internal/web
// never imports awsprov (AWS calls run in provisioning jobs or behind
// provision's interfaces that cmd/portal wires), although internal/provision,
// which it imports, does.
func TestDirectImports(t *testing.T) {
	const mod = "github.com/hyperpod-governance/portal/"
	rules := map[string][]string{
		"internal/web": {mod + "internal/provision/awsprov"},
	}
	for pkg, forbidden := range rules {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "../../"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, imp := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s, which its doc.go forbids", pkg, imp)
				}
			}
		}
	}
}

// TestProductNeverImportsSupport: the test, benchmark and build support
// under internal/support (the README's map says so) is never a dependency
// of a product package, so the portal binary cannot carry a test endpoint,
// the benchmark's seeding or the image builder.
func TestProductNeverImportsSupport(t *testing.T) {
	const support = "github.com/hyperpod-governance/portal/internal/support/"
	checked := 0
	for pkg, deps := range moduleDeps(t) {
		if !strings.HasPrefix(pkg, "internal/") && !strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "internal/support/") {
			continue
		}
		checked++
		for _, d := range deps {
			if strings.HasPrefix(d, support) {
				t.Errorf("%s depends on %s: product code must not use the support packages", pkg, d)
			}
		}
	}
	if checked < 15 {
		t.Fatalf("checked only %d packages", checked)
	}
}
