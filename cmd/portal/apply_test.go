package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// applyPortal is a `portal serve --dev` in this process (its built-in
// identity provider, a SQLite database, the provisioner in dry-run mode)
// whose cluster settings let a team have two connections (the portal
// manages the ClusterQueues, so a contract names its own namespaces),
// with the inventory set for four p5 instances by the admin, and a
// read-write token of team red's owner in a file.
type applyPortal struct {
	r         *replica
	dbPath    string
	admin     *browserSession
	tokenFile string
}

var reTokenSecret = regexp.MustCompile(`data-testid="token-secret">(hpp_[A-Za-z0-9_-]+)<`)

func newApplyPortal(t *testing.T) *applyPortal {
	t.Helper()
	dir := t.TempDir()
	settings := writeFile(t, filepath.Join(dir, "cluster.yaml"), "cluster_queue: {managed_by_portal: true}\n")
	p := serveInProcess(t, "serve", "--dev", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "portal.db"),
		"--session-key-file", filepath.Join(dir, "session.key"), "--leader-id", "apply-test_1", "--cluster-settings", settings)
	r := &replica{id: "dev", url: p.url}
	owner := signInAt(t, r, "owner.red")
	code, _, body := owner.post(t, r, "/settings/tokens", url.Values{"name": {"ci"}, "scope": {string(workflow.TokenReadWrite)}, "days": {"30"}})
	m := reTokenSecret.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("make a token = %d\n%s", code, body)
	}
	ap := &applyPortal{r: r, dbPath: filepath.Join(dir, "portal.db"), admin: signInAt(t, r, "admin"), tokenFile: writeFile(t, filepath.Join(dir, "token"), m[1]+"\n")}
	form := url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"4"}}
	if code, _, body := ap.admin.post(t, r, "/admin/inventory", form); code != http.StatusOK || !strings.Contains(body, `data-testid="inventory-saved"`) {
		t.Fatalf("set the inventory = %d\n%s", code, body)
	}
	return ap
}

// apply runs `portal contract apply` against server (the portal's URL
// unless given) and returns its output and error.
func (ap *applyPortal) apply(t *testing.T, server string, extra ...string) (string, error) {
	t.Helper()
	if server == "" {
		server = ap.r.url
	}
	var out, errOut bytes.Buffer
	args := append([]string{"contract", "apply"}, extra...)
	args = append(args, "--server", server, "--token-file", ap.tokenFile)
	err := run(t.Context(), args, env{}.get, &out, &errOut)
	return out.String() + errOut.String(), err
}

// connections is team red's connections as the API lists them.
func (ap *applyPortal) connections(t *testing.T) []apiConn {
	t.Helper()
	tok, err := readToken(ap.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	conns, err := newAPIClient(ap.r.url, tok).listTeam(t.Context(), "red")
	if err != nil {
		t.Fatal(err)
	}
	return conns
}

// approve approves connection id's waiting version as the admin, with the
// fields of the decide form on its page. The provisioner of --dev runs its
// job dry (it records the plan, and the connection stays approved), so the
// test then marks the connection active, as a worker's successful job
// would (provisioning is not this test's subject; internal/provision's
// tests are).
func (ap *applyPortal) approve(t *testing.T, id int64) {
	t.Helper()
	path := fmt.Sprintf("/connections/%d", id)
	resp, page := ap.admin.get(t, ap.r, path)
	decide := url.Values{"decision": {"approve"}, "reason": {"apply test"}}
	for _, f := range reDecideField.FindAllStringSubmatch(page, -1) {
		decide.Set(f[1], html.UnescapeString(f[2]))
	}
	if resp.StatusCode != http.StatusOK || decide.Get("hash") == "" {
		t.Fatalf("admin opens %s: %d, decide form %v", path, resp.StatusCode, decide)
	}
	if code, _, body := ap.admin.post(t, ap.r, path+"/decide", decide); code != http.StatusSeeOther {
		t.Fatalf("approve %s = %d\n%s", path, code, body)
	}
	waitFor(t, ap.admin.c, ap.r.url+path, "provisioning.dry_run")
	db, err := store.Open(t.Context(), ap.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ExecForTest(t.Context(), fmt.Sprintf(`UPDATE connections SET state = 'active' WHERE id = %d AND state = 'approved' AND approved_version = 1`, id)); err != nil {
		t.Fatal(err)
	}
	for _, c := range ap.connections(t) {
		if c.ID == id && (c.State != string(workflow.StateActive) || c.ApprovedVersion != 1) {
			t.Fatalf("connection %d after its approval: %s", id, versions([]apiConn{c}))
		}
	}
}

// dryRunShowedThePlans checks that the dry run's output before the
// files were filed holds, line by line, the plan summary an admin sees
// on each request filed since (the plan route of its version 1), the
// preview's stand-in for the id (math.MaxInt64, said in the plan's
// warnings) read as the request's id.
func (ap *applyPortal) dryRunShowedThePlans(t *testing.T, dry string, conns []apiConn) {
	t.Helper()
	tok, err := readToken(ap.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		var plan struct {
			Summary []string `json:"summary"`
		}
		if _, err := newAPIClient(ap.r.url, tok).do(t.Context(), http.MethodGet, c.Links.Self+"/versions/1/plan", nil, nil, &plan); err != nil || len(plan.Summary) == 0 {
			t.Fatalf("the plan of #%d: %v %v", c.ID, err, plan)
		}
		shown := strings.ReplaceAll(dry, strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(c.ID, 10))
		for _, line := range plan.Summary {
			if !strings.Contains(shown, "    "+line+"\n") {
				t.Errorf("the dry run did not show #%d's plan line %q:\n%s", c.ID, line, dry)
			}
		}
	}
}

// repoContracts writes team red's two contracts, one as JSON and one as
// YAML, into a new directory.
func repoContracts(t *testing.T) (dir string, train workflow.Contract) {
	t.Helper()
	dir = t.TempDir()
	for _, name := range []string{"train", "serve"} {
		c := workflow.ExampleContract()
		c.Namespaces = []string{"red-" + name}
		for _, arn := range []*string{&c.ProjectRoleARN, &c.AccessRoleARN, &c.WorkloadRoleARN} {
			*arn = strings.Replace(*arn, "role/red-", "role/red-"+name+"-", 1)
		}
		c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
		if name == "train" {
			train = c
			writeContract(t, filepath.Join(dir, "train.json"), c)
			continue
		}
		b, _ := json.Marshal(c)
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "serve.yaml"), string(y))
	}
	return dir, train
}

func writeContract(t *testing.T, path string, c workflow.Contract) {
	t.Helper()
	b, _ := json.MarshalIndent(c, "", "  ")
	writeFile(t, path, string(b))
}

// versions is each connection's state, change and current version.
func versions(conns []apiConn) string {
	var parts []string
	for _, c := range conns {
		parts = append(parts, fmt.Sprintf("#%d %s/%s v%d a%d", c.ID, c.State, c.Amendment, c.CurrentVersion, c.ApprovedVersion))
	}
	return strings.Join(parts, "; ")
}

// TestContractApply is the repository flow of issue 37 against a real
// portal, over its API only: a directory of two contracts files two
// requests; applying again changes nothing; once an admin approved both,
// --dry-run prints a changed file's contract diff and plan diff and
// changes nothing; applying files exactly one change; twice more changes
// nothing.
func TestContractApply(t *testing.T) {
	ap := newApplyPortal(t)
	dir, train := repoContracts(t)
	dry, err := ap.apply(t, "", dir, "--dry-run")
	if err != nil || strings.Count(dry, "would file a new request") != 2 || strings.Count(dry, "  plan:\n") != 2 || len(ap.connections(t)) != 0 {
		t.Fatalf("the dry run of two new files: %v, %d connections\n%s", err, len(ap.connections(t)), dry)
	}
	out, err := ap.apply(t, "", dir)
	if err != nil {
		t.Fatalf("first apply: %v\n%s", err, out)
	}
	conns := ap.connections(t)
	if len(conns) != 2 || conns[0].State != "submitted" || conns[1].State != "submitted" {
		t.Fatalf("after the first apply: %s\n%s", versions(conns), out)
	}
	ap.dryRunShowedThePlans(t, dry, conns)
	for _, c := range conns {
		if link := fmt.Sprintf("%s/connections/%d", ap.r.url, c.ID); !strings.Contains(out, "submitted #"+fmt.Sprint(c.ID)) || !strings.Contains(out, link) {
			t.Errorf("the output does not link request #%d (%s):\n%s", c.ID, link, out)
		}
	}
	before := versions(conns)
	if out, err := ap.apply(t, "", dir); err != nil || strings.Count(out, "unchanged") != 2 || versions(ap.connections(t)) != before {
		t.Fatalf("second apply: %v, %s\n%s", err, versions(ap.connections(t)), out)
	}
	for _, c := range conns {
		ap.approve(t, c.ID)
	}
	approved := versions(ap.connections(t))

	// One file changes.
	train.Scheduling.FairShareWeight = 35
	train.Scheduling.Guaranteed[0].Count = 2
	writeContract(t, filepath.Join(dir, "train.json"), train)
	out, err = ap.apply(t, "", dir, "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	t.Logf("the dry run:\n%s", out)
	for _, want := range []string{"dry run: nothing changed", "contract (against version 1)", "-> 35", "plan diff (against the active version)", "update "} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not print %q:\n%s", want, out)
		}
	}
	if got := versions(ap.connections(t)); got != approved {
		t.Fatalf("the dry run changed the portal: %s, was %s", got, approved)
	}
	out, err = ap.apply(t, "", dir)
	if err != nil {
		t.Fatalf("apply the change: %v\n%s", err, out)
	}
	conns = ap.connections(t)
	changed := 0
	for _, c := range conns {
		if c.Amendment == "submitted" && c.CurrentVersion == 2 && c.ApprovedVersion == 1 {
			changed++
		} else if c.Amendment != "" || c.CurrentVersion != 1 {
			t.Errorf("connection %d: %s", c.ID, versions([]apiConn{c}))
		}
	}
	if changed != 1 || strings.Count(out, "unchanged") != 1 {
		t.Fatalf("want exactly one change filed: %s\n%s", versions(conns), out)
	}
	after := versions(conns)
	for i := range 2 {
		if out, err := ap.apply(t, "", dir); err != nil || strings.Count(out, "unchanged") != 2 || versions(ap.connections(t)) != after {
			t.Fatalf("apply #%d after the change: %v, %s\n%s", i+1, err, versions(ap.connections(t)), out)
		}
	}
}

// TestContractApplyFinishesAfterAPartialFailure: the portal refuses the
// submit once (a proxy in front of it answers 503): apply fails, naming
// what was not done, with the draft filed; the next run submits that draft
// and files nothing twice; the one after changes nothing.
func TestContractApplyFinishesAfterAPartialFailure(t *testing.T) {
	ap := newApplyPortal(t)
	dir, _ := repoContracts(t)
	target, _ := url.Parse(ap.r.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/submit") && refused.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"try again"}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	out, err := ap.apply(t, front.URL, dir)
	if err == nil || !strings.Contains(out, "not submitted (apply again to submit it)") || !strings.Contains(out, "503") {
		t.Fatalf("apply with a refused submit: %v\n%s", err, out)
	}
	conns := ap.connections(t)
	states := map[string]int{}
	for _, c := range conns {
		states[c.State]++
	}
	if len(conns) != 2 || states["draft"] != 1 || states["submitted"] != 1 {
		t.Fatalf("after the partial failure: %s", versions(conns))
	}
	out, err = ap.apply(t, "", dir)
	if err != nil || !strings.Contains(out, "was not submitted") {
		t.Fatalf("the re-run: %v\n%s", err, out)
	}
	conns = ap.connections(t)
	if len(conns) != 2 || conns[0].State != "submitted" || conns[1].State != "submitted" || conns[0].CurrentVersion != 1 || conns[1].CurrentVersion != 1 {
		t.Fatalf("after the re-run: %s\n%s", versions(conns), out)
	}
	if out, err := ap.apply(t, "", dir); err != nil || strings.Count(out, "unchanged") != 2 {
		t.Fatalf("a third run: %v\n%s", err, out)
	}
}

// TestContractApplyErrors: a bad token, an invalid file (named with its
// field), a contract the portal refuses (its field named), and bad
// arguments each fail with a message saying what, and change nothing.
func TestContractApplyErrors(t *testing.T) {
	ap := newApplyPortal(t)
	dir, train := repoContracts(t)
	bad := writeFile(t, filepath.Join(t.TempDir(), "token"), "hpp_"+strings.Repeat("A", 43))
	var out bytes.Buffer
	err := run(t.Context(), []string{"contract", "apply", dir, "--server", ap.r.url, "--token-file", bad}, env{}.get, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "refused the token") {
		t.Errorf("a bad token: %v", err)
	}
	broken := filepath.Join(t.TempDir(), "broken.json")
	writeFile(t, broken, `{"team":"red","surprise":1}`)
	if out, err := ap.apply(t, "", broken); err == nil || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("an unknown field: %v\n%s", err, out)
	}
	noCluster := train
	noCluster.ClusterName = ""
	f := filepath.Join(t.TempDir(), "nocluster.json")
	writeContract(t, f, noCluster)
	if out, err := ap.apply(t, "", f); err == nil || !strings.Contains(err.Error(), "cluster_name: required") {
		t.Errorf("no cluster: %v\n%s", err, out)
	}
	refused := train
	refused.AccountID = "12"
	f = filepath.Join(t.TempDir(), "refused.json")
	writeContract(t, f, refused)
	out2, err := ap.apply(t, "", f)
	if err == nil || !strings.Contains(out2, "field account_id") || !strings.Contains(out2, "422") {
		t.Errorf("a contract the portal refuses: %v\n%s", err, out2)
	}
	if out2, err := ap.apply(t, "", f, "--dry-run"); err == nil || !strings.Contains(out2, "would refuse") || !strings.Contains(out2, "field account_id") {
		t.Errorf("the dry run of a contract the portal would refuse: %v\n%s", err, out2)
	}
	if n := len(ap.connections(t)); n != 0 {
		t.Errorf("%d connections after refusals, want none", n)
	}
	for _, args := range [][]string{{"contract", "apply", dir}, {"contract", "apply", "--server", ap.r.url, "--token-file", ap.tokenFile}, {"contract", "apply", dir, "--bogus"}} {
		if err := run(t.Context(), args, env{}.get, &out, &out); err == nil || !strings.Contains(err.Error(), "usage: portal contract apply") {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestDecideApply is apply's rule for each place a file's connection can
// be, against the file's hash "new" (the portal's versions hash "cur" and
// "old"): what it does, and where it refuses.
func TestDecideApply(t *testing.T) {
	conn := func(state workflow.State, a workflow.Amendment, cur, approved string) *remote {
		r := &remote{conn: apiConn{ID: 7, State: string(state), Amendment: string(a), CurrentVersion: 2, ApprovedVersion: 1}, curHash: cur, approvedHash: approved}
		return r
	}
	for _, tc := range []struct {
		name        string
		open, ended *remote
		want        applyAction
		fails       bool
	}{
		{name: "nothing there", want: actCreate},
		{name: "only a rejected other contract", ended: conn(workflow.StateRejected, "", "old", ""), want: actCreate},
		{name: "rejected, this contract", ended: conn(workflow.StateRejected, "", "new", ""), want: actNothing},
		{name: "withdrawn, this contract", ended: conn(workflow.StateWithdrawn, "", "new", ""), want: actNothing},
		{name: "draft of this contract", open: conn(workflow.StateDraft, "", "new", ""), want: actSubmit},
		{name: "draft of another", open: conn(workflow.StateDraft, "", "cur", ""), want: actEditSubmit},
		{name: "sent back, unchanged", open: conn(workflow.StateChangesRequested, "", "new", ""), want: actNothing},
		{name: "sent back, changed", open: conn(workflow.StateChangesRequested, "", "cur", ""), want: actEditSubmit},
		{name: "in review, same", open: conn(workflow.StateSubmitted, "", "new", ""), want: actNothing},
		{name: "in review, changed", open: conn(workflow.StateSubmitted, "", "cur", ""), fails: true},
		{name: "provisioning, changed", open: conn(workflow.StateProvisioning, "", "cur", "cur"), fails: true},
		{name: "active, same as approved", open: conn(workflow.StateActive, "", "cur", "new"), want: actNothing},
		{name: "active, changed", open: conn(workflow.StateActive, "", "cur", "cur"), want: actEditSubmit},
		{name: "under review, changed", open: conn(workflow.StateUnderReview, "", "old", "old"), want: actEditSubmit},
		{name: "draft change of this contract", open: conn(workflow.StateActive, workflow.AmendDraft, "new", "old"), want: actSubmit},
		{name: "draft change of another", open: conn(workflow.StateActive, workflow.AmendDraft, "cur", "old"), want: actEditSubmit},
		{name: "draft change, file back at the active version", open: conn(workflow.StateActive, workflow.AmendDraft, "cur", "new"), fails: true},
		{name: "change sent back, unchanged", open: conn(workflow.StateActive, workflow.AmendChangesRequested, "new", "old"), want: actNothing},
		{name: "change in review, same", open: conn(workflow.StateActive, workflow.AmendSubmitted, "new", "old"), want: actNothing},
		{name: "change in review, changed", open: conn(workflow.StateActive, workflow.AmendSubmitted, "cur", "old"), fails: true},
		{name: "change being applied, changed", open: conn(workflow.StateActive, workflow.AmendApproved, "cur", "old"), fails: true},
		{name: "revoking, changed", open: conn(workflow.StateRevoking, "", "cur", "cur"), fails: true},
	} {
		d := decideApply("new", tc.open, tc.ended)
		if (d.err != nil) != tc.fails || (!tc.fails && d.act != tc.want) {
			t.Errorf("%s: %+v, want action %d (fails %v)", tc.name, d, tc.want, tc.fails)
		}
		if d.err == nil && d.why == "" {
			t.Errorf("%s: no reason given", tc.name)
		}
	}
}

// TestMatchByIdentity: a file's connection is the open one of its team,
// cluster, orchestrator and namespaces (in any order); two open ones are
// refused; the newest ended one is kept aside.
func TestMatchByIdentity(t *testing.T) {
	c := workflow.ExampleContract()
	c.Namespaces = []string{"b", "a"}
	other := c
	other.Namespaces = []string{"c"}
	same := c
	same.Namespaces = []string{"a", "b"}
	same.BusinessPurpose = "changed: not part of the identity"
	mk := func(id int64, st workflow.State, k workflow.Contract) remote {
		return remote{conn: apiConn{ID: id, State: string(st)}, cur: k}
	}
	f := localContract{file: "f.json", c: c}
	open, ended, err := match(f, []remote{mk(1, workflow.StateRejected, c), mk(2, workflow.StateActive, same), mk(3, workflow.StateDraft, other), mk(4, workflow.StateWithdrawn, same)})
	if err != nil || open == nil || open.conn.ID != 2 || ended == nil || ended.conn.ID != 4 {
		t.Errorf("match = %+v, %+v, %v", open, ended, err)
	}
	if _, _, err := match(f, []remote{mk(2, workflow.StateActive, same), mk(5, workflow.StateSubmitted, c)}); err == nil || !strings.Contains(err.Error(), "#2, #5") {
		t.Errorf("two open connections of one identity: %v", err)
	}
}
