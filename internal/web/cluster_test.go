package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
	"github.com/hyperpod-governance/portal/internal/usage/prom"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// fakeCluster is a ClusterChecker with canned answers.
type fakeCluster struct {
	readiness provision.Readiness
	inv       provision.ObservedInventory
	err       error
	asked     []string
}

func (f *fakeCluster) Readiness(context.Context) provision.Readiness { return f.readiness }

func (f *fakeCluster) PlanReadiness(context.Context) provision.Readiness { return f.readiness }

func (f *fakeCluster) ReadInventory(_ context.Context, cluster string) (provision.ObservedInventory, error) {
	f.asked = append(f.asked, cluster)
	return f.inv, f.err
}

func TestClusterReadinessPage(t *testing.T) {
	fc := &fakeCluster{readiness: provision.Readiness{Checks: []provision.Check{
		{Name: provision.CheckKueueAPI, Status: provision.CheckFailing, Detail: "the cluster does not serve kueue.x-k8s.io/v1beta2 (it serves only v1beta1)", Todo: "Upgrade the task governance add-on (amazon-sagemaker-hyperpod-taskgovernance) to v1.6.0-eksbuild.1 or later"},
		{Name: provision.CheckNetworkPolicies, Status: provision.CheckOK, Detail: "Enforced: the aws-network-policy-agent container ..."},
	}}}
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck = fc })
	admin := h.signIn("admin")
	resp, body := h.get(admin.c, "/admin/cluster")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/cluster = %d", resp.StatusCode)
	}
	for _, want := range []string{`data-testid="readiness"`, `data-testid="check-failing"`, "kueue.x-k8s.io/v1beta2", "v1.6.0-eksbuild.1", `data-testid="check-ok"`, "Enforced"} {
		if !strings.Contains(body, want) {
			t.Errorf("the readiness page lacks %q", want)
		}
	}
	if _, home := h.get(admin.c, "/admin"); !strings.Contains(home, `href="/admin/cluster"`) {
		t.Error("the admin home does not link the readiness page")
	}
	for _, u := range []string{"owner.red", "reviewer", "finance"} {
		if resp, _ := h.get(noRedirect(h.signIn(u).c), "/admin/cluster"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s GET /admin/cluster = %d, want 403", u, resp.StatusCode)
		}
	}
	// Without a checker every check is unknown, with the reason; no 500.
	h2 := newHarness(t, false)
	resp, body = h2.get(h2.signIn("admin").c, "/admin/cluster")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="check-unknown"`) || !strings.Contains(body, "dry-run") {
		t.Errorf("readiness without sources = %d", resp.StatusCode)
	}
}

// The readiness page shows the contracts' admission rules' roll-out mode
// and the API server's counts (from the readiness the checker read), or
// says they could not be read; without a mode (no checker of them) there
// is no such section.
func TestClusterReadinessShowsAdmissionCounts(t *testing.T) {
	fc := &fakeCluster{readiness: provision.Readiness{
		Checks:          []provision.Check{{Name: provision.CheckAdmissionCounts, Status: provision.CheckOK, Detail: "Mode warn."}},
		AdmissionMode:   provision.AdmissionWarn,
		AdmissionCounts: &provision.AdmissionCounts{Warn: 17, Deny: 4, Audit: 9},
	}}
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck = fc })
	admin := h.signIn("admin")
	_, body := h.get(admin.c, "/admin/cluster")
	for _, want := range []string{`data-testid="admission-mode"`, "<strong>warn</strong>", "returns the refusal as a warning",
		`data-testid="admission-warn">17<`, `data-testid="admission-deny">4<`, `data-testid="admission-audit">9<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the readiness page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-testid="admission-uncounted"`) {
		t.Error("counts read, yet the page says they were not")
	}

	fc.readiness.AdmissionMode, fc.readiness.AdmissionCounts = provision.AdmissionDeny, nil
	_, body = h.get(admin.c, "/admin/cluster")
	if !strings.Contains(body, "<strong>deny</strong>") || !strings.Contains(body, "is refused") ||
		!strings.Contains(body, `data-testid="admission-uncounted"`) || strings.Contains(body, `data-testid="admission-counts"`) {
		t.Error("deny mode without counts: the page does not say so")
	}

	fc.readiness.AdmissionMode = ""
	if _, body = h.get(admin.c, "/admin/cluster"); strings.Contains(body, `data-testid="admission-mode"`) {
		t.Error("a mode shown though none was read")
	}
}

func TestInventoryRefreshFromCluster(t *testing.T) {
	const p5, g5 = "ml.p5.48xlarge", "ml.g5.8xlarge"
	fc := &fakeCluster{inv: provision.ObservedInventory{Cluster: "shared-hp", Types: []provision.ObservedType{
		{InstanceType: p5, Capacity: 6, Basis: provision.BasisNodes, GroupCurrent: 8, GroupTarget: 8, Nodes: 8, NodesSchedulable: 6},
		{InstanceType: g5, Capacity: 16, Basis: provision.BasisNodes, GroupCurrent: 16, GroupTarget: 16, Nodes: 16, NodesSchedulable: 16},
	}}}
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck, o.ClusterCanRefresh = fc, true })
	ctx := context.Background()
	admin := h.signIn("admin")
	_, page := h.get(admin.c, "/admin/inventory")
	if !strings.Contains(page, `data-testid="refresh-form"`) || !strings.Contains(page, `data-testid="inventory-rule"`) {
		t.Fatal("the inventory page offers no refresh, or does not say how the count is taken")
	}
	// Non-admins may not refresh.
	if resp, _ := h.postAs(h.signIn("reviewer"), "/admin/inventory/refresh", url.Values{"cluster": {"shared-hp"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reviewer refresh = %d, want 403", resp.StatusCode)
	}
	// A bad name is refused on the page, kept in the field, nothing read.
	resp, body := h.postAs(admin, "/admin/inventory/refresh", url.Values{"cluster": {"bad name!"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="refresh-error"`) || !strings.Contains(body, `value="bad name!"`) || len(fc.asked) != 0 {
		t.Errorf("bad cluster name = %d, asked %v", resp.StatusCode, fc.asked)
	}
	// Without a CSRF token: refused.
	if resp, _ := h.post(noRedirect(admin.c), "/admin/inventory/refresh", url.Values{"cluster": {"shared-hp"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("refresh without CSRF token = %d, want 403", resp.StatusCode)
	}

	resp, body = h.postAs(admin, "/admin/inventory/refresh", url.Values{"cluster": {"shared-hp"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Read shared-hp from the cluster: 2 instance types.") {
		t.Fatalf("refresh = %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{"8 / 8", "6 of 8", `data-testid="basis">nodes<`, `data-testid="last-refresh"`} {
		if !strings.Contains(body, want) {
			t.Errorf("after the refresh the page lacks %q", want)
		}
	}
	if inv, _ := h.db.Inventory(ctx, "shared-hp"); inv[p5] != 6 || inv[g5] != 16 {
		t.Errorf("inventory after the refresh = %v", inv)
	}
	evs, _ := h.db.AuditEvents(ctx, store.AuditFilter{ObjectType: "cluster", ActionPrefix: "inventory.refresh"}, 0, 10)
	if len(evs) != 1 || evs[0].Actor != "admin@example.test" {
		t.Errorf("refresh audit events = %+v", evs)
	}

	// A manual override wins and is shown as such, next to what was observed.
	if resp, _ := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {p5}, "count": {"7"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("override = %d", resp.StatusCode)
	}
	_, page = h.get(admin.c, "/admin/inventory")
	if !strings.Contains(page, "manual override") || !strings.Contains(page, "(observed 6)") {
		t.Error("the page does not show the override next to the observed count")
	}
	if inv, _ := h.db.Inventory(ctx, "shared-hp"); inv[p5] != 7 {
		t.Errorf("inventory with the override = %v", inv)
	}

	// The approval page's capacity math uses the resulting inventory:
	// the override's 7 × p5 is the cluster capacity there.
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, detail := h.get(admin.c, "/connections/1")
	if !strings.Contains(detail, "<td>"+p5+"</td><td>7</td>") {
		t.Errorf("the approval page's capacity table does not count the inventory's 7 × %s", p5)
	}

	// A read that fails is shown, never a 500; the observation stays.
	fc.err = errors.New("hyperpod cluster x: describe: AccessDeniedException")
	resp, body = h.postAs(admin, "/admin/inventory/refresh", url.Values{"cluster": {"shared-hp"}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "AccessDeniedException") {
		t.Errorf("failed read = %d", resp.StatusCode)
	}
	if inv, _ := h.db.Inventory(ctx, "shared-hp"); inv[g5] != 16 {
		t.Errorf("a failed refresh changed the inventory: %v", inv)
	}
	fc.err = provision.ErrClusterName
	if resp, _ := h.postAs(admin, "/admin/inventory/refresh", url.Values{"cluster": {""}}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("refresh without a name where one is needed = %d, want 422", resp.StatusCode)
	}
}

func TestInventoryRefreshUnavailableWithoutSources(t *testing.T) {
	h := newHarness(t, false)
	admin := h.signIn("admin")
	_, page := h.get(admin.c, "/admin/inventory")
	if strings.Contains(page, `data-testid="refresh-form"`) || !strings.Contains(page, `data-testid="refresh-unavailable"`) {
		t.Error("the page offers a refresh with nothing to read")
	}
	if resp, body := h.postAs(admin, "/admin/inventory/refresh", url.Values{"cluster": {"shared-hp"}}); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "Nothing to read") {
		t.Errorf("refresh with nothing to read = %d", resp.StatusCode)
	}
}

// The approval page warns when the cluster would fail the job (Kueue) or
// not enforce the plan's NetworkPolicies.
func TestApprovalPageWarnsOfClusterReadiness(t *testing.T) {
	fc := &fakeCluster{readiness: provision.Readiness{Checks: []provision.Check{
		{Name: provision.CheckKueueAPI, Status: provision.CheckFailing, Detail: "The cluster does not serve kueue.x-k8s.io/v1beta2.", Todo: "Upgrade the task governance add-on."},
		{Name: provision.CheckNetworkPolicies, Status: provision.CheckFailing, Detail: "NOT enforced: no agent.", Todo: "Turn on enableNetworkPolicy."},
		{Name: provision.CheckTaskGovernance, Status: provision.CheckUnknown, Detail: "not read"},
	}}}
	h := newHarness(t, false, func(o *Options) { o.ClusterCheck = fc })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract()))
	f.Set("intent", "submit")
	h.postAs(owner, "/teams/red/connections", f)
	_, body := h.get(h.signIn("admin").c, "/connections/1")
	for _, want := range []string{"Cluster readiness, Kueue API version: The cluster does not serve kueue.x-k8s.io/v1beta2. Upgrade the task governance add-on.", "Cluster readiness, Network policies: NOT enforced"} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval page lacks the warning %q", want)
		}
	}
	if strings.Contains(body, "not read") {
		t.Error("an unknown check became a warning")
	}
	// The owner's view reads nothing from the cluster.
	if _, body := h.get(owner.c, "/connections/1"); strings.Contains(body, "Cluster readiness,") {
		t.Error("the owner's page shows readiness warnings")
	}
}

// fakeProber is a utilization source whose probe returns a canned Probe
// (the probe itself runs against a real Prometheus in package prom).
type fakeProber struct {
	usage.Utilization
	probe prom.Probe
	asked [][]string
}

func (f *fakeProber) Probe(_ context.Context, teams []string, _ time.Time) (prom.Probe, error) {
	f.asked = append(f.asked, teams)
	return f.probe, nil
}

// /admin/cluster probes the utilization source for the live connections'
// namespaces and shows the probe's warning, naming the label to configure.
func TestClusterReadinessProbesUtilization(t *testing.T) {
	fp := &fakeProber{probe: prom.Probe{Label: "namespace", Series: 3, Elsewhere: map[string][]string{"exported_namespace": {"hyperpod-ns-red"}}}}
	h := newHarness(t, false, func(o *Options) { o.Utilization = fp })
	activeRed(t, h)
	_, body := h.get(h.signIn("admin").c, "/admin/cluster")
	if len(fp.asked) != 1 || !slices.Equal(fp.asked[0], []string{"hyperpod-ns-red"}) {
		t.Errorf("probed for %v, want the live connection's namespace", fp.asked)
	}
	for _, want := range []string{"GPU utilization series (Prometheus)", `data-testid="check-failing"`, "--prometheus-namespace-label=exported_namespace"} {
		if !strings.Contains(body, want) {
			t.Errorf("the readiness page lacks %q", want)
		}
	}
	fp.probe = prom.Probe{Label: "namespace", Series: 3, Found: []string{"hyperpod-ns-red"}}
	if _, body = h.get(h.signIn("admin").c, "/admin/cluster"); strings.Contains(body, "prometheus-namespace-label") || !strings.Contains(body, `carry team namespaces in label &#34;namespace&#34;: hyperpod-ns-red`) {
		t.Errorf("with the series found the page still warns or does not say so")
	}
}
