package web

import (
	"errors"
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

// TestPlanCacheBuildsOnce: a version's plan is built once and then served
// from the cache; a failed build is not cached.
func TestPlanCacheBuildsOnce(t *testing.T) {
	var c planTextCache
	red := workflow.ExampleContract()
	builds := 0
	build := func() (provision.Plan, error) {
		builds++
		return provision.BuildPlan(7, 1, red.Hash(), red, provision.ClusterSettings{})
	}
	key := planKey{7, 1, red.Hash()}
	first, err := c.get(key, build)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.get(key, build)
	if err != nil || builds != 1 || second.hash != first.hash || second.yaml != first.yaml || len(second.plan.Objects) != len(first.plan.Objects) {
		t.Errorf("second get: %d builds, %v; want the first plan, built once", builds, err)
	}
	failing := func() (provision.Plan, error) { builds++; return provision.Plan{}, errors.New("no plan") }
	for range 2 {
		if _, err := c.get(planKey{8, 1, "x"}, failing); err == nil {
			t.Error("a failed build returned no error")
		}
	}
	if builds != 3 {
		t.Errorf("%d builds; want a failed build retried, not cached", builds)
	}
}
