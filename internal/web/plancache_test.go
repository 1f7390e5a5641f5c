package web

import (
	"fmt"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The plan text cache returns what the plan renders, hit or miss; it is
// keyed by the version's hash, so another contract under the same id and
// version number gets its own plan; and it holds at most planTextCacheMax
// plans.
func TestPlanTextCache(t *testing.T) {
	var c planTextCache
	build := func(team string) (workflow.Contract, provision.Plan) {
		t.Helper()
		k := workflow.ExampleContractFor(team)
		p, err := provision.BuildPlan(7, 1, k.Hash(), k, provision.ClusterSettings{})
		if err != nil {
			t.Fatal(err)
		}
		return k, p
	}
	red, redPlan := build("red")
	blue, bluePlan := build("blue")
	for i := range 2 {
		y, h := c.texts(planKey{7, 1, red.Hash()}, redPlan)
		if y != redPlan.YAML() || h != redPlan.Hash() {
			t.Errorf("call %d: the cached texts differ from the plan's", i+1)
		}
	}
	if y, h := c.texts(planKey{7, 1, blue.Hash()}, bluePlan); y != bluePlan.YAML() || h != bluePlan.Hash() || h == redPlan.Hash() {
		t.Error("another contract under the same id and version got the first one's plan")
	}
	for i := range planTextCacheMax + 10 {
		c.texts(planKey{int64(100 + i), 1, fmt.Sprint(i)}, redPlan)
		if n := c.len(); n > planTextCacheMax {
			t.Fatalf("the cache holds %d plans, more than %d", n, planTextCacheMax)
		}
	}
}
