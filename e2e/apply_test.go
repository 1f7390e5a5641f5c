package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestRepositoryFlowThroughTheBrowser is issue 37's repository flow with
// people in the browser and the pipeline's command as a process: the
// owner of team red makes a read-write token on /settings/tokens;
// `portal contract apply` on a directory of two contract files files two
// requests; the admin approves both on their pages; one file changes and
// applying again files exactly one change, which the admin sees in the
// queue; applying twice more changes nothing. The portal manages the
// ClusterQueues (cluster settings), so team red may have two connections,
// each with namespaces of its own.
func TestRepositoryFlowThroughTheBrowser(t *testing.T) {
	t.Parallel()
	b := browser(t)
	dir := t.TempDir()
	settings := filepath.Join(dir, "cluster.yaml")
	mustOK(t, os.WriteFile(settings, []byte("cluster_queue: {managed_by_portal: true}\n"), 0o600), "write the cluster settings")
	p := startPortal(t, "--cluster-settings", settings)

	// The admin types the cluster's capacity in (no cluster in --dev).
	admin := signIn(t, b, p, "Ada Admin")
	_, err := admin.Goto(p.URL + "/admin/inventory")
	mustOK(t, err, "open the inventory")
	mustOK(t, admin.Locator("#cluster").Fill("shared-hp"), "type the cluster")
	mustOK(t, admin.Locator("#instance_type").Fill("ml.p5.48xlarge"), "type the instance type")
	mustOK(t, admin.Locator("#count").Fill("4"), "type the count")
	clickTo(t, admin, admin.GetByTestId("inventory-save"), "**/admin/inventory", "save the inventory")
	mustOK(t, admin.GetByTestId("inventory-saved").WaitFor(), "see the inventory saved")

	// The owner makes the pipeline's token.
	owner := signIn(t, b, p, "Olivia Owner (Red)")
	_, err = owner.Goto(p.URL + "/settings/tokens")
	mustOK(t, err, "open the token settings")
	mustOK(t, owner.Locator("#name").Fill("contracts repository"), "name the token")
	_, err = owner.Locator("#scope").SelectOption(playwright.SelectOptionValues{Values: &[]string{string(workflow.TokenReadWrite)}})
	mustOK(t, err, "choose read and write")
	clickTo(t, owner, owner.GetByTestId("token-create"), "**/settings/tokens", "create the token")
	secret := text(t, owner, "token-secret")
	tokenFile := filepath.Join(dir, "token")
	mustOK(t, os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600), "write the token file")

	repo := filepath.Join(dir, "contracts")
	mustOK(t, os.Mkdir(repo, 0o755), "make the repository")
	train := redContract(t, repo, "train")
	redContract(t, repo, "serve")
	apply := func(what string) string {
		t.Helper()
		out, err := exec.Command(portalBinary(t), "contract", "apply", repo, "--server", p.URL, "--token-file", tokenFile).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return string(out)
	}

	out := apply("the first apply")
	conns := redConnections(t, p)
	if len(conns) != 2 || strings.Count(out, "submitted #") != 2 {
		t.Fatalf("the first apply: %v\n%s", conns, out)
	}
	for _, c := range conns {
		if c.State != workflow.StateSubmitted || !strings.Contains(out, fmt.Sprintf("%s/connections/%d", p.URL, c.ID)) {
			t.Errorf("after the first apply: #%d %s\n%s", c.ID, c.State, out)
		}
	}

	// The admin approves both in the browser.
	for _, c := range conns {
		path := fmt.Sprintf("/connections/%d", c.ID)
		_, err := admin.Goto(p.URL + path)
		mustOK(t, err, "open "+path)
		mustOK(t, admin.Locator("#reason").Fill("Filed from the contracts repository; fits."), "give a reason")
		clickTo(t, admin, admin.GetByTestId("approve"), "**"+path, "approve "+path)
		if got := text(t, admin, "connection-state"); got != "Approved" {
			t.Fatalf("%s after approval: %q", path, got)
		}
		// --dev runs the provisioning job dry and the connection stays
		// approved; it is marked active as a successful job would
		// (provisioning is not this test's subject).
		mustOK(t, admin.Locator(`[data-testid="job-state"]:text("succeeded")`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(30000)}), "see the dry run of "+path+" finish")
		settled(t, admin, "the page settles after the dry run")
		markActive(t, p, c.ID)
	}
	screenshot(t, admin, "40-repository-flow-approved")

	// One file changes: exactly one change is filed.
	train.Scheduling.FairShareWeight = 35
	train.Scheduling.Guaranteed[0].Count = 2
	writeJSON(t, filepath.Join(repo, "train.json"), train)
	out = apply("the apply of the changed file")
	after := redConnections(t, p)
	changed, changedID := 0, int64(0)
	for i, c := range after {
		if c.CurrentVersion != conns[i].CurrentVersion {
			changed, changedID = changed+1, c.ID
			if c.CurrentVersion != 2 || c.Amendment != workflow.AmendSubmitted || c.State != workflow.StateActive {
				t.Errorf("the change: #%d v%d %s/%s", c.ID, c.CurrentVersion, c.State, c.Amendment)
			}
		}
	}
	if changed != 1 || strings.Count(out, "unchanged") != 1 || strings.Count(out, "submitted #") != 1 {
		t.Fatalf("the apply of one changed file changed %d connections:\n%s", changed, out)
	}
	_, err = admin.Goto(p.URL + "/admin")
	mustOK(t, err, "open the admin queue")
	if n := count(t, admin.Locator(`tr[data-testid^="queue-"]`), "queued requests"); n != 1 || count(t, admin.GetByTestId(fmt.Sprintf("queue-%d", changedID)), "the change") != 1 {
		t.Errorf("the admin's queue holds %d requests, want the change of #%d only", n, changedID)
	}
	screenshot(t, admin, "41-repository-flow-change-queued")

	// Twice more: nothing. What an apply could change is compared, not
	// whole rows: the portal's review scheduler sets a newly active
	// connection's review date (and so its updated time) whenever its
	// pass comes (ci45 saw it land between two applies).
	for i := range 2 {
		out := apply(fmt.Sprintf("apply again (%d)", i+1))
		if strings.Count(out, "unchanged") != 2 || filed(redConnections(t, p)) != filed(after) {
			t.Errorf("apply again (%d) changed something: %s, before %s\n%s", i+1, filed(redConnections(t, p)), filed(after), out)
		}
	}
}

// filed is what contract apply may change of each connection: its
// versions, state, change request and purpose.
func filed(conns []store.Connection) string {
	var b strings.Builder
	for _, c := range conns {
		fmt.Fprintf(&b, "#%d v%d/%d %s/%s %q; ", c.ID, c.CurrentVersion, c.ApprovedVersion, c.State, c.Amendment, c.Purpose)
	}
	return b.String()
}

// redContract writes team red's example contract for connection name
// (namespaces red-<name>, roles of its own, one p5 instance guaranteed)
// as <name>.json in dir.
func redContract(t *testing.T, dir, name string) workflow.Contract {
	t.Helper()
	c := workflow.ExampleContract()
	c.Namespaces = []string{"red-" + name}
	for _, arn := range []*string{&c.ProjectRoleARN, &c.AccessRoleARN, &c.WorkloadRoleARN} {
		*arn = strings.Replace(*arn, "role/red-", "role/red-"+name+"-", 1)
	}
	c.Scheduling.Guaranteed = []workflow.Capacity{{InstanceType: "ml.p5.48xlarge", Count: 1}}
	writeJSON(t, filepath.Join(dir, name+".json"), c)
	return c
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	mustOK(t, err, "encode "+path)
	mustOK(t, os.WriteFile(path, b, 0o644), "write "+path)
}

// redConnections is team red's connections in the portal's database,
// oldest first.
func redConnections(t *testing.T, p *portal) []store.Connection {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, p.DB)
	mustOK(t, err, "open the portal's database")
	defer db.Close()
	conns, _, err := db.ListConnections(ctx, store.ListFilter{Team: "red"}, 0, 10)
	mustOK(t, err, "list red's connections")
	for i, j := 0, len(conns)-1; i < j; i, j = i+1, j-1 {
		conns[i], conns[j] = conns[j], conns[i]
	}
	return conns
}

func markActive(t *testing.T, p *portal, id int64) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, p.DB)
	mustOK(t, err, "open the portal's database")
	defer db.Close()
	mustOK(t, db.ExecForTest(ctx, fmt.Sprintf(`UPDATE connections SET state = 'active' WHERE id = %d AND state = 'approved' AND approved_version = 1`, id)), "mark the connection active")
}
