package web

import (
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/views"
)

// TestPlanDiffRowConverts keeps provision.DiffRow and views.PlanDiffRow the
// same shape, so that the approval page converts one into the other
// (views.PlanDiffRow(row)) instead of copying fields by hand: this stops
// compiling when one of them changes alone.
func TestPlanDiffRowConverts(t *testing.T) {
	r := views.PlanDiffRow(provision.DiffRow{Action: "update", What: "ResourceQuota ns/q", Detail: "d"})
	if r.Action != "update" || r.What != "ResourceQuota ns/q" || r.Detail != "d" {
		t.Errorf("converted row %+v", r)
	}
}
