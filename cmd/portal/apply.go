package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// `portal contract apply FILE... --server URL --token-file F [--dry-run]`
// (issue 37, contracts as code): makes a portal's requests match contract
// files in the export format, over the JSON API only (no database), as the
// token's person. Each file is one contract; its connection is the one of
// the same identity (contractKey): the fields a change cannot alter. Per
// file, by where that connection stands (decideApply):
//
//   - none (or only rejected, withdrawn, revoked ones): file a request and
//     submit it;
//   - a draft: edit it when the file differs, and submit it;
//   - a live connection: when the file differs from its approved version
//     (or open change), file (or edit) its change and submit it;
//   - the file is what the portal has (in review, sent back unchanged,
//     being applied): nothing.
//
// So re-running after a partial failure finishes the work (a draft filed
// but not submitted is submitted), and running it on every commit changes
// nothing until a file changes. Approval stays with people in the portal.

const applyUsage = "usage: portal contract apply FILE|DIR... --server URL --token-file FILE [--dry-run]"

// applyOptions are apply's arguments.
type applyOptions struct {
	paths     []string
	server    string
	tokenFile string
	dryRun    bool
}

// applyArgs reads apply's arguments (after "apply").
func applyArgs(args []string, getenv func(string) string) (applyOptions, error) {
	o := applyOptions{server: getenv("PORTAL_URL"), tokenFile: getenv("PORTAL_TOKEN_FILE")}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-"):
			o.paths = append(o.paths, a)
		case name == "dry-run" && !hasVal:
			o.dryRun = true
		case name == "server" || name == "token-file":
			if !hasVal {
				if i+1 >= len(args) {
					return o, fmt.Errorf("--%s needs a value: %s", name, applyUsage)
				}
				val, i = args[i+1], i+1
			}
			if name == "server" {
				o.server = val
			} else {
				o.tokenFile = val
			}
		default:
			return o, fmt.Errorf("unknown flag %s: %s", a, applyUsage)
		}
	}
	switch {
	case len(o.paths) == 0:
		return o, errors.New("no contract files given: " + applyUsage)
	case o.server == "":
		return o, errors.New("--server URL is required (or PORTAL_URL): " + applyUsage)
	case o.tokenFile == "":
		return o, errors.New("--token-file FILE is required (or PORTAL_TOKEN_FILE; a token from the portal's /settings/tokens): " + applyUsage)
	}
	o.server = strings.TrimRight(o.server, "/")
	if !strings.HasPrefix(o.server, "https://") && !strings.HasPrefix(o.server, "http://") {
		return o, fmt.Errorf("--server %q: give the portal's URL, https://…", o.server)
	}
	return o, nil
}

// readToken reads the token file: one hpp_ token.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if !strings.HasPrefix(tok, "hpp_") || strings.ContainsAny(tok, " \n\t") {
		return "", fmt.Errorf("--token-file %s: not a portal token (one line, hpp_…, from /settings/tokens)", file)
	}
	return tok, nil
}

// localContract is one contract file.
type localContract struct {
	file string
	c    workflow.Contract
}

// contractFiles expands the paths (a directory is its *.json, *.yaml and
// *.yml files, in name order) and reads each. Every file is read before
// anything is sent; a bad file is named with its field.
func contractFiles(paths []string) ([]localContract, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		n := len(files)
		for _, e := range entries {
			if ext := strings.ToLower(filepath.Ext(e.Name())); !e.IsDir() && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("%s: no *.json, *.yaml or *.yml contract files", p)
		}
	}
	var out []localContract
	var problems []string
	seen := map[string]string{}
	for _, f := range files {
		c, err := readContractFile(f)
		if err == nil {
			err = checkLocal(f, c)
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		c = c.Normalize()
		if other, dup := seen[contractKey(c)]; dup {
			problems = append(problems, fmt.Sprintf("%s: the same connection as %s (%s); one file per connection", f, other, describeKey(c)))
			continue
		}
		seen[contractKey(c)] = f
		out = append(out, localContract{file: f, c: c})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%d contract file(s) invalid, nothing was sent:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return out, nil
}

// checkLocal is what a file must have before it is sent: a team and a
// cluster (its identity), and no field over the size limits.
func checkLocal(file string, c workflow.Contract) error {
	var bad []string
	c = c.Normalize()
	if c.Team == "" {
		bad = append(bad, "team: required")
	}
	if c.ClusterName == "" {
		bad = append(bad, "cluster_name: required")
	}
	for _, e := range c.LimitErrors() {
		bad = append(bad, e.Field+": "+e.Message)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %s", file, strings.Join(bad, "; "))
	}
	return nil
}

// contractKey is a contract's identity: its team, cluster, orchestrator and
// namespaces, the fields a change to a live connection cannot alter
// (workflow.AmendmentErrors), so a connection keeps its key for life.
func contractKey(c workflow.Contract) string {
	c = c.Normalize()
	ns := slices.Clone(c.Namespaces)
	slices.Sort(ns)
	return strings.Join([]string{c.Team, c.ClusterName, string(c.Orchestrator), strings.Join(ns, ",")}, "|")
}

func describeKey(c workflow.Contract) string {
	s := fmt.Sprintf("team %s, cluster %s", c.Team, c.ClusterName)
	if len(c.Namespaces) > 0 {
		s += ", namespaces " + strings.Join(c.Namespaces, ",")
	}
	if c.Orchestrator == workflow.OrchestratorSlurm {
		s += " (Slurm)"
	}
	return s
}

// applyCmd runs `portal contract apply`.
func applyCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o, err := applyArgs(args, getenv)
	if err != nil {
		return err
	}
	tok, err := readToken(o.tokenFile)
	if err != nil {
		return err
	}
	files, err := contractFiles(o.paths)
	if err != nil {
		return err
	}
	cl := newAPIClient(o.server, tok)
	remotes, err := cl.remotesFor(ctx, files)
	if err != nil {
		return err
	}
	failed := 0
	for _, f := range files {
		if err := applyOne(ctx, cl, f, remotes, o.dryRun, stdout); err != nil {
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", f.file, err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d contract file(s) failed (see above); run it again once fixed: what succeeded is kept, and is not done twice", failed, len(files))
	}
	return nil
}
