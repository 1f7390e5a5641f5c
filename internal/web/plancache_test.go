package web

import (
	"errors"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The detail page's plans (Server.builtPlan, the key production builds)
// are what the plan renders, hit or miss; they are keyed by the version's
// hash, so another contract under the same id and version number gets its
// own plan; and the cache holds at most planTextCacheMax plans.
func TestPlanTextCache(t *testing.T) {
	s := &Server{}
	version := func(team string) (store.Version, provision.Plan) {
		t.Helper()
		k := workflow.ExampleContractFor(team)
		p, err := provision.BuildPlan(7, 1, k.Hash(), k, provision.ClusterSettings{})
		if err != nil {
			t.Fatal(err)
		}
		return store.Version{ConnectionID: 7, Version: 1, Contract: k, Hash: k.Hash()}, p
	}
	red, redPlan := version("red")
	blue, bluePlan := version("blue")
	for i := range 2 {
		got, err := s.builtPlan(7, red)
		if err != nil || got.yaml != redPlan.YAML() || got.hash != redPlan.Hash() {
			t.Errorf("call %d: the cached plan differs from the version's (%v)", i+1, err)
		}
	}
	if got, err := s.builtPlan(7, blue); err != nil || got.yaml != bluePlan.YAML() || got.hash != bluePlan.Hash() || got.hash == redPlan.Hash() {
		t.Errorf("another contract under the same id and version got the first one's plan (%v)", err)
	}
	for i := range planTextCacheMax + 10 {
		if _, err := s.planTexts.get(planKey{int64(100 + i), 1, red.Hash}, func() (provision.Plan, error) { return provision.Plan{}, nil }); err != nil {
			t.Fatal(err)
		}
		if n := s.planTexts.len(); n > planTextCacheMax {
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
