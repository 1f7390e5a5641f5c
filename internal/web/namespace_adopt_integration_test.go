package web

// Runs against the test bed's real kube-apiserver (PORTAL_TEST_KUBECONFIG,
// set by `make test`); skipped without it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/support/testenv"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// TestApprovalAdoptsAnExistingNamespaceIntegration (issue 10 item 14), on
// a real API server: the contract names a namespace that exists and that
// neither the portal nor HyperPod created. The approval page warns and
// offers the adoption; approving without it is refused with nothing
// stored; with it, the approval goes through and its job carries the
// adoption. A namespace that does not exist needs no adoption.
func TestApprovalAdoptsAnExistingNamespaceIntegration(t *testing.T) {
	kubeconfig := testenv.Require(t, "PORTAL_TEST_KUBECONFIG")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	// At the portal's client rate: client-go's default (5 requests/s)
	// would make the page's drift check overrun its deadline.
	applier, err := provision.NewApplier(provision.WithPortalRate(cfg))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b)
	nsRes := applier.Client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	cleanup := func(ns string) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = nsRes.Delete(ctx, ns, metav1.DeleteOptions{})
		})
	}

	for _, tc := range []struct {
		name    string
		exists  bool
		foreign bool
	}{
		{"existing namespace made by hand", true, true},
		{"namespace that does not exist", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "red-adopt-" + suffix
			if !tc.exists {
				ns = "red-fresh-" + suffix
			}
			cleanup(ns)
			if tc.exists {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "Namespace",
					"metadata": map[string]any{"name": ns, "labels": map[string]any{"app": "legacy"}},
				}}
				if _, err := nsRes.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h := newHarness(t, false, func(o *Options) {
				o.Live = applier
				// The portal manages the queues, so a contract may name a
				// namespace of its own choosing.
				o.Cluster.ClusterQueueManagedByPortal = true
			})
			c := workflow.ExampleContract()
			c.Namespaces = []string{ns}
			f := formValues(formFromContract(c))
			f.Set("intent", "submit")
			if resp, body := h.postAs(h.signIn("owner.red"), "/teams/red/connections", f); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("submit = %d: %q", resp.StatusCode, fieldError(body, "namespaces"))
			}
			admin := h.signIn("admin")
			if resp, _ := h.postAs(admin, "/admin/inventory", map[string][]string{"cluster": {"shared-hp"}, "instance_type": {"ml.p5.48xlarge"}, "count": {"8"}}); resp.StatusCode != http.StatusOK {
				t.Fatalf("set inventory = %d", resp.StatusCode)
			}
			v, err := h.db.Version(t.Context(), 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			_, page := h.get(admin.c, "/connections/1")
			if got := strings.Contains(page, `data-testid="adopt-namespace-box"`); got != tc.foreign {
				t.Errorf("adoption offered: %v, want %v", got, tc.foreign)
			}
			form := map[string][]string{"decision": {"approve"}, "reason": {"fits"}, "version": {"1"}, "hash": {v.Hash}, "plan_hash": {h.planHash(1, 1)}}
			resp, body := h.postAs(admin, "/connections/1/decide", form)
			if !tc.foreign {
				if resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("approval = %d, want 303", resp.StatusCode)
				}
				if js, err := h.db.JobsFor(t.Context(), 1); err != nil || len(js) != 1 || js[0].AdoptNamespace != "" {
					t.Errorf("jobs %+v, %v; want one adopting nothing", js, err)
				}
				return
			}
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "neither the portal nor HyperPod created it") {
				t.Errorf("approval without adoption = %d; want 409", resp.StatusCode)
			}
			assertNotApproved(t, h)
			form["adopt_namespace"] = []string{ns}
			if resp, _ := h.postAs(admin, "/connections/1/decide", form); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("approval with adoption = %d, want 303", resp.StatusCode)
			}
			if js, err := h.db.JobsFor(t.Context(), 1); err != nil || len(js) != 1 || js[0].AdoptNamespace != ns {
				t.Errorf("jobs %+v, %v; want one adopting %s", js, err, ns)
			}
		})
	}
}
