package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The instance types a contract may name, and the inventory may list, are
// the cluster settings' (from --cluster-settings, by default the SDK's
// HyperPod types the accelerator table describes), not a hand-written list.
func TestInstanceTypesComeFromTheClusterSettings(t *testing.T) {
	h := newHarness(t, false, func(o *Options) { o.Cluster.InstanceTypes = []string{"ml.g5.8xlarge"} })
	owner := h.signIn("owner.red")
	f := formValues(formFromContract(workflow.ExampleContract())) // guarantees ml.p5.48xlarge
	f.Set("intent", "submit")
	resp, body := h.postAs(owner, "/teams/red/connections", f)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "is not an instance type of this cluster") {
		t.Errorf("a type outside the settings' list = %d", resp.StatusCode)
	}
	admin := h.signIn("admin")
	if resp, body := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode == http.StatusOK && strings.Contains(body, "Saved") {
		t.Error("the inventory took a type outside the settings' list")
	}
	if resp, body := h.postAs(admin, "/admin/inventory", url.Values{"cluster": {"shared-hp"}, "instance_type": {"ml.g5.8xlarge"}, "count": {"8"}}); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Saved") {
		t.Errorf("the inventory refused a type of the settings' list: %d", resp.StatusCode)
	}

	// The default list is the SDK's types the accelerator table describes:
	// ml.p5.48xlarge is one.
	h = newHarness(t, false)
	owner = h.signIn("owner.red")
	if resp, body := h.postAs(owner, "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the example contract with the default settings = %d\n%s", resp.StatusCode, body)
	}
}
