package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// An inventory the usage collector wrote (no user behind it) says so on
// the admin's page, with the nodes it counted.
func TestInventoryPageNamesTheCollector(t *testing.T) {
	h := newHarness(t, false)
	admin := h.signIn("admin")
	rows := []store.ObservedRow{{InstanceType: "ml.p5.48xlarge", Capacity: 2, Basis: "nodes", GroupCurrent: -1, GroupTarget: -1, Nodes: 3, NodesSchedulable: 2}}
	if err := h.db.ReplaceObserved(t.Context(), "shared-hp", rows, workflow.Actor{Email: "usage collector"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, body := h.get(admin.c, "/admin/inventory")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/inventory = %d", resp.StatusCode)
	}
	for _, want := range []string{"by the usage collector (it follows the nodes).", "2 of 3"} {
		if !strings.Contains(body, want) {
			t.Errorf("the inventory page lacks %q", want)
		}
	}
}
