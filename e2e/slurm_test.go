package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/hyperpod-governance/portal/internal/provision/slurmprov"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestOwnerFilesASlurmConnectionAndWatchesItBecomeActive: a portal for a
// Slurm cluster (no --kubeconfig, --slurm-conf) on the test bed's real
// Slurm (slurmctld, slurmdbd on MariaDB): the owner of team red files
// a Slurm contract in the browser, the admin sees the exact sacctmgr
// commands in the plan, approves, and watches the provisioning job make
// the connection active; the accounting database then holds the team's
// account, QoS and one association per person the contract names (read
// back with sacctmgr -P, not from the portal).
func TestOwnerFilesASlurmConnectionAndWatchesItBecomeActive(t *testing.T) {
	t.Parallel()
	conf := testenv.Require(t, "PORTAL_TEST_SLURM_CONF")
	partition := testenv.Require(t, "PORTAL_TEST_SLURM_PARTITION")
	// The people the example contract names (its owners and signal
	// owners, portal users of the dev identity provider) become POSIX users
	// by the default template "{local}": the part before '@'. Slurm needs
	// no local account for an association; jobs are not run here.
	example := workflow.ExampleContractFor("red")
	named := []string{example.BusinessOwner, example.OperationsOwner, example.CostOwner, example.ExceptionOwner}
	for _, sg := range example.Signals {
		named = append(named, sg.Owner)
	}
	var members []string
	for _, e := range named {
		if local, _, _ := strings.Cut(e, "@"); local != "" && !slices.Contains(members, local) {
			members = append(members, local)
		}
	}
	slices.Sort(members)
	clusterName := testenv.SlurmClusterName(t, conf)
	// Names of this run only: the provision package's Slurm tests may run
	// on the same Slurm at the same time.
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	account, qos := "e2ered"+suffix, "e2ered"+suffix+"-gpu"
	r := slurm.Local{Conf: conf}
	t.Cleanup(func() {
		// Whatever the test left (a failure before revocation), gone.
		slurmprov.Revoke(context.Background(), r, slurmprov.Plan{Cluster: clusterName, Account: slurmprov.Account{Name: account}, QoS: slurmprov.QoS{Name: qos}})
	})

	settings := filepath.Join(t.TempDir(), "cluster.yaml")
	mustOK(t, os.WriteFile(settings, []byte("slurm:\n  cluster: "+clusterName+"\n"), 0o600), "write the cluster settings")
	b := browser(t)
	// No --kubeconfig: a HyperPod Slurm cluster has no Kubernetes
	// cluster, and the portal provisions its Slurm connections through the
	// Slurm transport alone.
	p := startPortal(t, "--slurm-conf", conf, "--cluster-settings", settings)

	owner := signIn(t, b, p, "Olivia Owner (Red)")
	_, err := owner.Goto(p.URL + "/teams/red/connections/new?example=1")
	mustOK(t, err, "open the form with the example")
	_, err = owner.Locator("#orchestrator").SelectOption(playwright.SelectOptionValues{Values: &[]string{"slurm"}})
	mustOK(t, err, "choose Slurm")
	for id, v := range map[string]string{
		"eks_cluster_name": "", "namespaces": "",
		"slurm_account": account, "slurm_partition": partition, "slurm_qos": qos,
	} {
		mustOK(t, owner.Locator("#"+id).Fill(v), "fill "+id)
	}
	_, err = owner.ExpectEvent("load", func() error { return owner.GetByTestId("save-submit").Click() })
	mustOK(t, err, "save and submit")
	if !strings.HasSuffix(owner.URL(), "/connections/1") {
		errs, _ := owner.Locator(".field-error").AllTextContents()
		t.Fatalf("save and submit stayed on %s; the form says: %q", owner.URL(), errs)
	}

	admin := signIn(t, b, p, "Ada Admin")
	_, err = admin.Goto(p.URL + "/connections/1")
	mustOK(t, err, "admin opens the request")
	cmds, err := admin.GetByTestId("slurm-commands").Locator("li").AllTextContents()
	mustOK(t, err, "read the plan's Slurm commands")
	all := strings.Join(cmds, "\n")
	for _, want := range append([]string{"sacctmgr -i add qos " + qos, "sacctmgr -i add account " + account}, members...) {
		if !strings.Contains(all, want) {
			t.Errorf("the plan's Slurm commands lack %q:\n%s", want, all)
		}
	}
	if n := count(t, admin.GetByText("dry-run mode"), "dry-run notes"); n != 0 {
		t.Error("with a Slurm transport the Slurm plan must not say dry run, though no Kubernetes cluster is configured")
	}
	screenshot(t, admin, "40-slurm-plan")
	mustOK(t, admin.Locator("#reason").Fill("Fits the partition; provision it."), "give a reason")
	clickTo(t, admin, admin.GetByTestId("approve"), "**/connections/1", "approve")
	mustOK(t, admin.Locator(`[data-testid="connection-state"]:text("Active")`).WaitFor(
		playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "watch the connection become active")
	settled(t, admin, "the Slurm connection's page")
	if got := text(t, admin, "job-state"); got != "succeeded" {
		t.Errorf("job state = %q", got)
	}
	screenshot(t, admin, "41-slurm-active")

	// The accounting database, as Slurm reports it.
	ctx := context.Background()
	rows, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "associations", "where", "account="+account, "format=Account,User,Partition,QOS")
	mustOK(t, err, "sacctmgr show associations")
	var users []string
	for _, a := range rows {
		if a["QOS"] != qos {
			t.Errorf("association %v may use %q, want only %s", a, a["QOS"], qos)
		}
		if a["User"] != "" {
			users = append(users, a["User"]+"@"+a["Partition"])
		}
	}
	slices.Sort(users)
	var want []string
	for _, m := range members {
		want = append(want, m+"@"+partition)
	}
	if !slices.Equal(users, want) {
		t.Errorf("associations of %s: users %v, want %v", account, users, want)
	}
	q, err := slurm.Query(ctx, r, "sacctmgr", "-P", "show", "qos", "where", "name="+qos, "format=Name")
	mustOK(t, err, "sacctmgr show qos")
	if len(q) != 1 {
		t.Errorf("qos %s: %v, want one", qos, q)
	}
}
