// Command modalign fails when two of the builds that share the Go build cache
// compile one module at different versions, and with -fix raises the older ones.
//
//	go run ./hack/modalign        # make lint runs this
//	go run ./hack/modalign -fix   # go get the newest version into each build, then go mod tidy
//
// make test compiles the portal's graph (lint, tests) and then the test bed's
// binaries, from nested modules under hack/. All of them build with
// CGO_ENABLED=0 and -trimpath, so a package compiled for one build is a
// build-cache hit for another, but only when it and everything under it are the
// same versions in both. Kubernetes' libraries are a third of the portal's graph
// (client-go, apimachinery, api) and much of kube-apiserver's; with
// golang.org/x/net one version apart, all of them compiled twice. In the cold
// run cold1 (2026-12-05) the test bed's build took 44 of the run's 161
// CPU-minutes, the lint that compiled the portal's graph 32.
//
// The builds fall in two groups, each checked on its own: the portal's graph
// with etcd, kwok and helm (Kubernetes libraries v0.37), and the test bed's
// Kubernetes v1.35.4 (kube-apiserver, kube-controller-manager, kube-scheduler,
// kubectl) with Kueue v0.17.0, which is built on the v0.35 libraries as its
// release is (hack/testbed/kube.sh says why the API server is v1.35). Not
// checked: hack/dex and hack/prometheus (their own pinned releases; little of
// their graphs is shared).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// build is one go build make test runs: the module's directory, its packages,
// and the group of builds whose versions must agree.
type build struct {
	group string
	dir   string
	pkgs  []string
	test  bool // the portal's own: its tests' imports count too
}

var builds = []build{
	{group: "portal", dir: ".", pkgs: []string{"./..."}, test: true},
	{group: "portal", dir: "hack/etcd", pkgs: []string{"."}},
	{group: "portal", dir: "hack/kwok", pkgs: []string{"sigs.k8s.io/kwok/cmd/kwok"}},
	{group: "portal", dir: "hack/helm", pkgs: []string{"helm.sh/helm/v3/cmd/helm"}},
	{group: "kubernetes", dir: "hack/kubebin", pkgs: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler", "./applycrds"}},
	{group: "kubernetes", dir: "hack/kubectl", pkgs: []string{"k8s.io/kubernetes/cmd/kubectl"}},
	{group: "kubernetes", dir: "hack/kueue", pkgs: []string{"sigs.k8s.io/kueue/cmd/kueue", "./kueuehooks"}},
}

func main() {
	fix := flag.Bool("fix", false, "go get the newest version of each shared module into every build that compiles an older one")
	flag.Parse()
	if err := run(*fix); err != nil {
		fmt.Fprintln(os.Stderr, "modalign:", err)
		os.Exit(1)
	}
}

func run(fix bool) error {
	// versions[group][module][dir] = the version that build compiles.
	versions := map[string]map[string]map[string]string{}
	for _, b := range builds {
		mods, err := compiledModules(b)
		if err != nil {
			return err
		}
		if versions[b.group] == nil {
			versions[b.group] = map[string]map[string]string{}
		}
		for m, v := range mods {
			if versions[b.group][m] == nil {
				versions[b.group][m] = map[string]string{}
			}
			versions[b.group][m][b.dir] = v
		}
	}
	shared, apart := 0, 0
	raise := map[string][]string{} // dir -> module@version
	for _, g := range slices.Sorted(maps.Keys(versions)) {
		s, a := compare(g, versions[g], raise)
		shared, apart = shared+s, apart+a
	}
	if apart == 0 {
		fmt.Printf("modalign: in each group (%s), the builds agree on all %d modules they share\n",
			strings.Join(slices.Sorted(maps.Keys(versions)), ", "), shared)
		return nil
	}
	if !fix {
		return fmt.Errorf("%d of the %d shared modules are compiled at different versions (left: the newest; then each build that is older): run go run ./hack/modalign -fix", apart, shared)
	}
	for _, dir := range slices.Sorted(maps.Keys(raise)) {
		if err := gocmd(dir, append([]string{"get"}, raise[dir]...)...); err != nil {
			return err
		}
		if err := gocmd(dir, "mod", "tidy"); err != nil {
			return err
		}
	}
	fmt.Println("modalign: raised; run it again (a raise can pull other modules up)")
	return nil
}

// compare counts the modules that two or more of a group's builds compile
// (shared) and those they compile at different versions (apart), printing
// each of those, and adds to raise what each older build must get.
func compare(group string, versions map[string]map[string]string, raise map[string][]string) (shared, apart int) {
	for _, m := range slices.Sorted(maps.Keys(versions)) {
		byDir := versions[m]
		if len(byDir) < 2 {
			continue
		}
		shared++
		newest := ""
		for _, v := range byDir {
			if newest == "" || semver.Compare(v, newest) > 0 {
				newest = v
			}
		}
		var older []string
		for _, dir := range slices.Sorted(maps.Keys(byDir)) {
			if byDir[dir] != newest {
				older = append(older, fmt.Sprintf("%s (%s)", dir, byDir[dir]))
				raise[dir] = append(raise[dir], m+"@"+newest)
			}
		}
		if len(older) > 0 {
			apart++
			fmt.Printf("%s: %s: %s in %s\n", group, m, newest, strings.Join(older, ", "))
		}
	}
	return shared, apart
}

// compiledModules lists the module and version of every package the build
// compiles (the replacement's, where go.mod replaces one).
func compiledModules(b build) (map[string]string, error) {
	args := []string{"list", "-deps", "-f",
		"{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}} {{.Version}}{{else}}{{.Path}} {{.Version}}{{end}}{{end}}{{end}}"}
	if b.test {
		args = append(args, "-test")
	}
	cmd := exec.Command("go", append(args, b.pkgs...)...)
	cmd.Dir = b.dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %v: %s", b.dir, err, stderr.String())
	}
	mods := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			mods[f[0]] = f[1]
		}
	}
	return mods, sc.Err()
}

func gocmd(dir string, args ...string) error {
	fmt.Printf("(cd %s && go %s)\n", dir, strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Clean(dir)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
