package image_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/support/image"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// fitsApache2 are the licenses a module linked into the Apache-2.0 portal
// may carry: the permissive ones, whose terms are notice-keeping only
// (and, for Apache-2.0, carrying NOTICE files, which docs/licenses.md
// reproduces). A copyleft license (GPL, LGPL, AGPL; MPL-2.0's file-level
// copyleft too, to be looked at first) fails the test until a person has
// read it.
var fitsApache2 = map[string]bool{
	"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true,
	"ISC": true, "Unlicense": true, "SQLite-public-domain": true,
	// Documentation only (github.com/opencontainers/go-digest's docs).
	"CC-BY-SA-4.0": true,
}

// licenseRows reads docs/licenses.md's table: module -> license column.
func licenseRows(doc string) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 6 && strings.Contains(cells[1], ".") {
			rows[strings.TrimSpace(cells[1])] = strings.TrimSpace(cells[3])
		}
	}
	return rows
}

// checkLicenses returns the problems of a licenses table against go.mod's
// requires.
func checkLicenses(gomod, doc string) []string {
	var problems []string
	rows := licenseRows(doc)
	sc := bufio.NewScanner(strings.NewReader(gomod))
	inRequire := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "require" && f[1] == "(":
			inRequire = true
			continue
		case len(f) == 1 && f[0] == ")":
			inRequire = false
			continue
		case len(f) >= 3 && f[0] == "require":
			f = f[1:]
		case !inRequire || len(f) < 2:
			continue
		}
		lic, ok := rows[f[0]]
		if !ok {
			problems = append(problems, f[0]+" is in go.mod but not in docs/licenses.md (go run ./hack/licenses > docs/licenses.md)")
			continue
		}
		lic, _, _ = strings.Cut(lic, " (")
		for _, l := range strings.Split(lic, " AND ") {
			if !fitsApache2[l] {
				problems = append(problems, f[0]+": license "+l+" is not known to fit Apache-2.0")
			}
		}
	}
	return problems
}

// TestLicenseFitsEveryDependency: the repository's LICENSE is the license
// the image label asserts, every module go.mod requires is listed in
// docs/licenses.md, and each listed license fits Apache-2.0. A module
// added to go.mod without regenerating the list, or under a license not
// known to fit, fails it.
func TestLicenseFitsEveryDependency(t *testing.T) {
	root := testenv.ModuleRoot()
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if image.Licenses != "Apache-2.0" || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0, January 2004") {
		t.Errorf("the image label says %q; LICENSE begins %q", image.Licenses, string(lic[:min(len(lic), 120)]))
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "licenses.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(licenseRows(string(doc))); n < 100 {
		t.Fatalf("docs/licenses.md lists %d modules", n)
	}
	for _, p := range checkLicenses(string(gomod), string(doc)) {
		t.Error(p)
	}
	// The check is not vacuous: a new module, or a copyleft one, fails it.
	extra := string(gomod) + "\nrequire example.com/new v1.0.0\n"
	if p := checkLicenses(extra, string(doc)); len(p) != 1 || !strings.Contains(p[0], "example.com/new") {
		t.Errorf("a module missing from the list: %v", p)
	}
	gpl := strings.Replace(string(doc), "| github.com/labstack/echo/v4 | v4.16.0 | MIT |", "| github.com/labstack/echo/v4 | v4.16.0 | GPL-3.0-only |", 1)
	if p := checkLicenses(string(gomod), gpl); len(p) != 1 || !strings.Contains(p[0], "GPL-3.0-only") {
		t.Errorf("a GPL module: %v", p)
	}
}
